// Scalar helpers of the KOKKOS kernels, callable on host and device: element
// conversions, a vectorisable exp2, and the register-blocked micro-GEMM both
// attention products are written in. Kokkos API and plain C++ only, so the
// same code compiles for Serial, OpenMP, CUDA or HIP execution spaces.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <limits>

namespace mla::kokkos {

// Kokkos 4 moved the math functions from Kokkos::Experimental to Kokkos.
#if KOKKOS_VERSION >= 40000
namespace kmath = ::Kokkos;
#else
namespace kmath = ::Kokkos::Experimental;
#endif

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

KOKKOS_INLINE_FUNCTION int imin(int a, int b) { return a < b ? a : b; }
KOKKOS_INLINE_FUNCTION int imax(int a, int b) { return a > b ? a : b; }

KOKKOS_INLINE_FUNCTION float neg_infinity() { return -std::numeric_limits<float>::infinity(); }

// binary16 -> binary32 without branches, so staging loops of fp16 tiles
// vectorise: the 15 magnitude bits shifted into binary32 position are the right
// value times 2^-112 for normal and subnormal halves alike; only inf/NaN (all
// exponent bits set) need their exponent widened.
KOKKOS_INLINE_FUNCTION float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t magnitude = half & 0x7fffu;
  std::uint32_t bits = float_bits(bits_float(magnitude << 13) * 0x1p112f);
  bits = magnitude >= 0x7c00u ? (0x7f800000u | ((magnitude & 0x3ffu) << 13)) : bits;
  return bits_float(bits | sign);
}

// binary32 -> binary16, round to nearest even, overflow to inf, NaN kept quiet.
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the half is subnormal with ulp 2^-24, the ulp of 0.5f: the
    // hardware's own rounding of the sum does the round-to-nearest-even.
    const float sum = bits_float(magnitude) + 0.5f;
    return static_cast<std::uint16_t>(sign | (float_bits(sum) - 0x3f000000u));
  }
  magnitude += 0xc8000fffu + ((magnitude >> 13) & 1u);  // rebias exponent by -112, round
  return static_cast<std::uint16_t>(sign | (magnitude >> 13));
}

KOKKOS_INLINE_FUNCTION float bf16_to_float(std::uint16_t bf16) {
  return bits_float(static_cast<std::uint32_t>(bf16) << 16);
}

KOKKOS_INLINE_FUNCTION std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

// OCP e4m3fn: saturates to +-448 (no infinities), NaN -> 0x7f with the sign
// bit, round to nearest even; matches mla::float_to_fp8_e4m3_bits.
KOKKOS_INLINE_FUNCTION std::uint8_t float_to_fp8_e4m3(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint8_t>(0x7fu);
  float magnitude = bits_float(bits & 0x7fffffffu);
  magnitude = magnitude > 448.0f ? 448.0f : magnitude;
  if (magnitude < 0x1p-6f) {
    // Subnormal e4m3 has ulp 2^-9, the ulp of 2^14 in binary32.
    const float sum = magnitude + 16384.0f;
    return static_cast<std::uint8_t>(sign | (float_bits(sum) - 0x46800000u));
  }
  std::uint32_t m = float_bits(magnitude);
  m += 0x7ffffu + ((m >> 20) & 1u);                                     // round to 3 mantissa bits
  return static_cast<std::uint8_t>(sign | ((m - (120u << 23)) >> 20));  // rebias 127 -> 7
}

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
  const float result = p * bits_float((n + 127u) << 23);
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
