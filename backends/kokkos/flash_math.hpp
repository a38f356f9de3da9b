// Scalar helpers of the KOKKOS kernels, callable on host and device: a
// vectorisable exp2 and the register-blocked micro-GEMM both attention
// products are written in (the element codecs are mla/detail/numeric.hpp's). Kokkos API and plain C++ only, so the
// same code compiles for Serial, OpenMP, CUDA or HIP execution spaces.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <limits>

#include "mla/detail/numeric.hpp"

namespace mla::kokkos {

// Kokkos 4 moved the math functions from Kokkos::Experimental to Kokkos.
#if KOKKOS_VERSION >= 40000
namespace kmath = ::Kokkos;
#else
namespace kmath = ::Kokkos::Experimental;
#endif

using numeric::float_bits;
using numeric::float_from_bits;

KOKKOS_INLINE_FUNCTION int imin(int a, int b) { return a < b ? a : b; }
KOKKOS_INLINE_FUNCTION int imax(int a, int b) { return a > b ? a : b; }

KOKKOS_INLINE_FUNCTION float neg_infinity() { return -std::numeric_limits<float>::infinity(); }

// 2^x for x <= 0 in a form compilers vectorise: no libm call, no table and
// no float->int conversion (g++ splits a conversion of a clamped value into
// two branches and then refuses to vectorise the loop). Adding 1.5 * 2^23
// rounds x to the integer n in the low mantissa bits; f = x - n lies in
// [-0.5, 0.5], 2^f comes from a degree-6 polynomial interpolating at
// Chebyshev nodes (max relative error 1.1e-7 in fp32 Horner evaluation), and
// 2^n is written into the exponent field. Inputs below -126, -inf included,
// return exactly 0, so masked scores become p = 0.
KOKKOS_INLINE_FUNCTION float exp2_nonpositive(float input) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: unit ulp for |x| < 2^22
  const float x = input < -126.0f ? -126.0f : input;
  const float shifted = x + kRound;
  const float f = x - (shifted - kRound);
  const std::uint32_t n = float_bits(shifted) - float_bits(kRound);  // round(x), two's complement
  float p = 0.000154614449f;
  p = p * f + 0.0013400428f;
  p = p * f + 0.00961805694f;
  p = p * f + 0.0555032715f;
  p = p * f + 0.240226507f;
  p = p * f + 0.693147182f;
  p = p * f + 1.0f;
  const float result = p * float_from_bits((n + 127u) << 23);
  return input < -126.0f ? 0.0f : result;
}

// C[kRows][kCols] = (row_scale ? C * row_scale : 0) + A[kRows][depth] * B[depth][kCols],
// fp32. A is addressed a[r * a_row + p * a_depth] so it can be read row-major
// (K tile) or transposed (P^T); B and C are row-major with leading dimensions
// ldb / ldc. The kRows x kCols accumulators stay in registers for the whole
// depth loop; the innermost loop is a unit-stride multiply-add across kCols of
// B's row with A's element broadcast, so no horizontal reduction is needed and
// the compiler vectorises it without -ffast-math.
//
// Inlined into one out-of-line copy per kernel variant (hot_loops.hpp).
// Checked with objdump on g++ 12 -O3 in the portable build: the depth loop of
// the avx512 variant (6 x 32) is 6 vbroadcastss of A and 12 vfmadd231ps zmm
// into accumulators held in registers for the whole loop; the avx2 variant
// issues 24 vfmadd231ps ymm per step, with some accumulators on the stack (16
// ymm registers); the baseline variant (4 x 8) is SSE2 mulps + addps. No
// AVX instruction appears outside the HotLoops functions.
template <int kRows, int kCols>
KOKKOS_FORCEINLINE_FUNCTION void micro_gemm_body(const float* KOKKOS_RESTRICT a, int a_row, int a_depth,
                                                 const float* KOKKOS_RESTRICT b, int ldb, int depth,
                                                 float* KOKKOS_RESTRICT c, int ldc,
                                                 const float* KOKKOS_RESTRICT row_scale) {
  float acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    const float scale = row_scale ? row_scale[r] : 0.0f;
    for (int j = 0; j < kCols; ++j) acc[r][j] = row_scale ? c[r * ldc + j] * scale : 0.0f;
  }
  for (int p = 0; p < depth; ++p) {
    const float* KOKKOS_RESTRICT b_row = b + static_cast<std::ptrdiff_t>(p) * ldb;
    for (int r = 0; r < kRows; ++r) {
      const float a_rp = a[r * a_row + p * a_depth];
      for (int j = 0; j < kCols; ++j) acc[r][j] += a_rp * b_row[j];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kCols; ++j) c[r * ldc + j] = acc[r][j];
  }
}

}  // namespace mla::kokkos
