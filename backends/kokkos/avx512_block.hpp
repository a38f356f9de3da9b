// The avx512 variant's register block for both fp32 attention products,
// written with intrinsics: micro_gemm_body's contract with kRows x 32
// columns. Its start and finish (C scaled into the accumulators, and the
// accumulators back to C) also serve the bf16 block (bf16_dot_loops.hpp).
// The compiled form of micro_gemm_body keeps its accumulators in registers
// during the depth loop but passes them to C through the stack, which costs
// a fifth of the value product (depth 64, one key tile); here they go from
// registers to C directly.
#pragma once

#include "hot_loops.hpp"

#if MLA_KOKKOS_ISA_DISPATCH

#include <immintrin.h>

#include <cstddef>

namespace mla::kokkos::avx512 {

// The accumulators of a kRows x 32 block before its products: C times
// row_scale[r], or zero without row_scale (micro_gemm_body's contract).
template <int kRows>
MLA_KOKKOS_AVX512 __attribute__((always_inline)) inline void start_block(__m512 (&acc)[kRows][2], const float* c,
                                                                         int ldc, const float* row_scale) {
  for (int r = 0; r < kRows; ++r) {
    if (row_scale != nullptr) {
      const __m512 scale = _mm512_set1_ps(row_scale[r]);
      acc[r][0] = _mm512_mul_ps(_mm512_loadu_ps(c + r * ldc), scale);
      acc[r][1] = _mm512_mul_ps(_mm512_loadu_ps(c + r * ldc + 16), scale);
    } else {
      acc[r][0] = _mm512_setzero_ps();
      acc[r][1] = _mm512_setzero_ps();
    }
  }
}

// The accumulators of a kRows x 32 block back to C.
template <int kRows>
MLA_KOKKOS_AVX512 __attribute__((always_inline)) inline void finish_block(const __m512 (&acc)[kRows][2], float* c,
                                                                          int ldc) {
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
  }
}

// c[r][0:32] = (row_scale ? c * row_scale[r] : 0) + sum_p a[r * a_row + p * a_depth] * b[p * ldb + 0:32].
template <int kRows>
MLA_KOKKOS_AVX512 __attribute__((noinline)) void fma_block(const float* a, int a_row, int a_depth, const float* b,
                                                           int ldb, int depth, float* c, int ldc,
                                                           const float* row_scale) {
  __m512 acc[kRows][2];
  start_block<kRows>(acc, c, ldc, row_scale);
  for (int p = 0; p < depth; ++p) {
    const float* b_row = b + static_cast<std::ptrdiff_t>(p) * ldb;
    const __m512 b0 = _mm512_loadu_ps(b_row);
    const __m512 b1 = _mm512_loadu_ps(b_row + 16);
    const float* a_col = a + static_cast<std::ptrdiff_t>(p) * a_depth;
    for (int r = 0; r < kRows; ++r) {
      const __m512 a_rp = _mm512_set1_ps(a_col[r * a_row]);
      acc[r][0] = _mm512_fmadd_ps(a_rp, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(a_rp, b1, acc[r][1]);
    }
  }
  finish_block<kRows>(acc, c, ldc);
}

}  // namespace mla::kokkos::avx512

#endif  // MLA_KOKKOS_ISA_DISPATCH
