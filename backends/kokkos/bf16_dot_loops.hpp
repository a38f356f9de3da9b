// The hot loops of the KOKKOS kernel's bf16 path on AVX512-BF16
// (flash_bf16.cpp): both attention products as vdpbf16ps register blocks,
// the online softmax writing P in bf16, and the staging of V in pairs.
// Written with intrinsics in functions that carry their own target
// attribute, like the avx512 variant of hot_loops.hpp, so the rest of the
// library stays baseline code and runs where the CPU lacks AVX512-BF16.
//
// vdpbf16ps multiplies 16 pairs of bf16 numbers and adds each pair's two
// products to one fp32 lane: dst[l] += a[2l] * b[2l] + a[2l+1] * b[2l+1],
// each product exact in fp32 (8-bit significands). A product over a depth
// of 2n therefore wants both operands in pairs along the depth: one operand
// is broadcast (a 32-bit pair to all lanes), the other holds in lane l the
// pair of column l. Operands are kept as uint32, one pair each: bits 0-15
// the even depth index, bits 16-31 the odd one.
#pragma once

#include "host_isa.hpp"

#if MLA_KOKKOS_ISA_DISPATCH

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "avx512_block.hpp"
#include "flash_math.hpp"

namespace mla::kokkos::bf16_dot {

#if defined(__clang__)
#define MLA_KOKKOS_AVX512_BF16 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")))
#else
#define MLA_KOKKOS_AVX512_BF16 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,prefer-vector-width=512")))
#endif

// Register block: kRows rows x 32 columns (two zmm) of fp32 accumulators,
// 16 of the 32 zmm registers for 8 rows.
inline constexpr int kBlockCols = 32;

// bf16 bits of a finite or infinite float, rounded to nearest even (P and
// the output are never NaN unless an input was).
KOKKOS_FORCEINLINE_FUNCTION std::uint32_t bf16_bits(float value) {
  const std::uint32_t bits = float_bits(value);
  return (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
}

// c[r][0:32] = (row_scale ? c * row_scale[r] : 0) + sum_p a(r, p) . b(p, 0:32),
// r < kRows, p < pairs, where a(r, p) is the pair a[r * a_row + p * a_pair]
// and b(p, l) the pair b[p * ldb + l] (indices in pairs). Same contract as
// micro_gemm_body, with pairs for depth.
template <int kRows>
MLA_KOKKOS_AVX512_BF16 __attribute__((noinline)) void dot_block(const std::uint32_t* a, int a_row, int a_pair,
                                                                const std::uint32_t* b, int ldb, int pairs, float* c,
                                                                int ldc, const float* row_scale) {
  __m512 acc[kRows][2];
  avx512::start_block<kRows>(acc, c, ldc, row_scale);
  for (int p = 0; p < pairs; ++p) {
    const std::uint32_t* b_row = b + static_cast<std::ptrdiff_t>(p) * ldb;
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_ps(b_row));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_ps(b_row + 16));
    const std::uint32_t* a_col = a + static_cast<std::ptrdiff_t>(p) * a_pair;
    for (int r = 0; r < kRows; ++r) {
      float pair = 0.0f;
      std::memcpy(&pair, a_col + r * a_row, sizeof pair);
      const __m512bh a_rp = reinterpret_cast<__m512bh>(_mm512_set1_ps(pair));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a_rp, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a_rp, b1);
    }
  }
  avx512::finish_block<kRows>(acc, c, ldc);
}

// Online softmax over one key tile for the kNc queries [r0, r0 + kNc),
// softmax_block_body's algorithm on unscaled scores: st is S^T ([key][query],
// row length kBr, raw q . k), scaled here by q_multiplier (scale * log2 e)
// into log2 units. P goes out in bf16 pairs of keys, pt[(j / 2) * kBr + r]
// (the A operand of the value product), with the pair of a last odd key
// completed by 0; the row sum adds P before rounding.
template <int kBr, int kNc>
MLA_KOKKOS_AVX512_BF16 __attribute__((noinline)) void softmax_block(float* st, std::uint32_t* pt, float* row_max,
                                                                    float* row_sum, float* row_alpha, int r0, int cols,
                                                                    bool masked, int shift, float q_multiplier) {
  float tile_max[kNc];
  for (int r = 0; r < kNc; ++r) tile_max[r] = neg_infinity();
  for (int j = 0; j < cols; ++j) {
    float* s_row = st + j * kBr + r0;
    // Queries r < j - shift do not see key j (none when not masked).
    const int hidden = masked ? imin(kNc, imax(0, j - shift - r0)) : 0;
    for (int r = 0; r < kNc; ++r) {
      const float s = r < hidden ? neg_infinity() : s_row[r] * q_multiplier;
      s_row[r] = s;
      tile_max[r] = s > tile_max[r] ? s : tile_max[r];
    }
  }
  float offset[kNc];
  for (int r = 0; r < kNc; ++r) {
    const float old_max = row_max[r0 + r];
    const float new_max = tile_max[r] > old_max ? tile_max[r] : old_max;
    // A query that has seen no key yet keeps max -inf (see softmax_block_body).
    offset[r] = new_max == neg_infinity() ? 0.0f : new_max;
    row_alpha[r0 + r] = exp2_nonpositive(old_max - offset[r]);
    row_max[r0 + r] = new_max;
  }
  float tile_sum[kNc];
  for (int r = 0; r < kNc; ++r) tile_sum[r] = 0.0f;
  for (int j = 0; j < cols; j += 2) {
    const float* even = st + j * kBr + r0;
    const float* odd = st + (j + 1 < cols ? j + 1 : j) * kBr + r0;
    const bool has_odd = j + 1 < cols;
    std::uint32_t* out = pt + (j / 2) * kBr + r0;
    for (int r = 0; r < kNc; ++r) {
      const float p_even = exp2_nonpositive(even[r] - offset[r]);
      const float p_odd = has_odd ? exp2_nonpositive(odd[r] - offset[r]) : 0.0f;
      tile_sum[r] += p_even + p_odd;
      out[r] = bf16_bits(p_even) | (bf16_bits(p_odd) << 16);
    }
  }
  for (int r = 0; r < kNc; ++r) row_sum[r0 + r] = row_sum[r0 + r] * row_alpha[r0 + r] + tile_sum[r];
}

// pairs[c] = v_even[c * stride] | v_odd[c * stride] << 16 (bf16 bits) for
// c < n, with v_odd == nullptr read as zeros: one pair row of V.
MLA_KOKKOS_AVX512_BF16 __attribute__((noinline)) inline void pair_rows(std::uint32_t* pairs,
                                                                       const std::uint16_t* v_even,
                                                                       const std::uint16_t* v_odd,
                                                                       std::ptrdiff_t stride, int n) {
  if (stride == 1 && v_odd != nullptr) {
    for (int c = 0; c < n; ++c) pairs[c] = v_even[c] | (static_cast<std::uint32_t>(v_odd[c]) << 16);
  } else {
    for (int c = 0; c < n; ++c) {
      const std::uint32_t odd = v_odd != nullptr ? v_odd[c * stride] : 0u;
      pairs[c] = v_even[c * stride] | (odd << 16);
    }
  }
}

}  // namespace mla::kokkos::bf16_dot

#endif  // MLA_KOKKOS_ISA_DISPATCH
