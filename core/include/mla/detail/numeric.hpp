// Internal: the numeric rules every implementation shares, in one header that
// host code (core, REFERENCE, KOKKOS), the GPU kernels (nvcc, hipcc) and the
// GPU emulator all include: the element codecs, log2(e), and which keys a
// causal query sees. Not part of the public API (not installed); callers
// convert elements with load_as_float / store_from_float (mla/tensor.hpp).
//
// The codecs use integer operations and plain fp32 arithmetic (no libm, no
// vendor intrinsic), so every compiler gives the same bits on host and device,
// and loops over them vectorise. They assume IEEE fp32 with subnormals kept
// (no flush-to-zero: none of the builds uses -ffast-math or -ftz).
#pragma once

#include <cstdint>
#include <cstring>

#include "mla/detail/host_device.hpp"
#include "mla/tensor.hpp"

namespace mla::numeric {

MLA_HOST_DEVICE inline std::uint32_t float_bits(float value) {
#if MLA_GPU_DEVICE_PASS
  return __float_as_uint(value);
#else
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

MLA_HOST_DEVICE inline float float_from_bits(std::uint32_t bits) {
#if MLA_GPU_DEVICE_PASS
  return __uint_as_float(bits);
#else
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// binary16 -> binary32, exactly and without branches, so staging loops of
// fp16 tiles vectorise: the 15 magnitude bits shifted into binary32 position
// are the right value times 2^-112 for normal and subnormal halves alike; only
// inf/NaN (all exponent bits set) need their exponent widened. NaN payloads
// are kept.
MLA_HOST_DEVICE inline float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t magnitude = half & 0x7fffu;
  std::uint32_t bits = float_bits(float_from_bits(magnitude << 13) * 0x1p112f);
  bits = magnitude >= 0x7c00u ? (0x7f800000u | ((magnitude & 0x3ffu) << 13)) : bits;
  return float_from_bits(bits | sign);
}

// binary32 -> binary16, round to nearest even, overflow to inf, NaN kept quiet.
MLA_HOST_DEVICE inline std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the half is subnormal with ulp 2^-24, the ulp of 0.5f: the
    // hardware's own rounding of the sum does the round-to-nearest-even.
    const float sum = float_from_bits(magnitude) + 0.5f;
    return static_cast<std::uint16_t>(sign | (float_bits(sum) - 0x3f000000u));
  }
  magnitude += 0xc8000fffu + ((magnitude >> 13) & 1u);  // rebias exponent by -112, round
  return static_cast<std::uint16_t>(sign | (magnitude >> 13));
}

// bfloat16: the top 16 bits of binary32.
MLA_HOST_DEVICE inline float bf16_to_float(std::uint16_t bf16) {
  return float_from_bits(static_cast<std::uint32_t>(bf16) << 16);
}

// Round to nearest even; NaN stays a quiet NaN.
MLA_HOST_DEVICE inline std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

// OCP e4m3fn (no infinities, largest finite 448): round to nearest even,
// saturate to +-448 as vLLM's static fp8 output quantisation does (infinities
// too), and NaN to 0x7f whatever its sign: e4m3fn's NaN codes are 0x7f and
// 0xff, and one code keeps the result independent of the NaN's origin.
MLA_HOST_DEVICE inline std::uint8_t float_to_fp8_e4m3(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint8_t>(0x7fu);
  float magnitude = float_from_bits(bits & 0x7fffffffu);
  magnitude = magnitude > 448.0f ? 448.0f : magnitude;
  if (magnitude < 0x1p-6f) {
    // Subnormal e4m3 has ulp 2^-9, the ulp of 2^14 in binary32.
    const float sum = magnitude + 16384.0f;
    return static_cast<std::uint8_t>(sign | (float_bits(sum) - 0x46800000u));
  }
  std::uint32_t rounded = float_bits(magnitude);
  rounded += 0x7ffffu + ((rounded >> 20) & 1u);                               // round to 3 mantissa bits
  return static_cast<std::uint8_t>(sign | ((rounded - (120u << 23)) >> 20));  // rebias 127 -> 7
}

// e4m3fn to binary32, exactly: 0x7f / 0xff are NaN (with their sign),
// exponent 0 holds the subnormals (a multiple of 2^-9), the rest are
// (1 + m/8) * 2^(e-7).
MLA_HOST_DEVICE inline float fp8_e4m3_to_float(std::uint8_t code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t exponent = (code >> 3) & 0xfu;
  const std::uint32_t mantissa = code & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return float_from_bits(sign | 0x7fc00000u);
  if (exponent == 0) return float_from_bits(sign | float_bits(static_cast<float>(mantissa) * (1.0f / 512.0f)));
  return float_from_bits(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// Storage type and float conversions of each element dtype, for code written
// once for every dtype (Element<D>::Storage, load, store).
template <DType D>
struct Element;

template <>
struct Element<DType::float32> {
  using Storage = float;
  static MLA_HOST_DEVICE float load(Storage value) { return value; }
  static MLA_HOST_DEVICE Storage store(float value) { return value; }
};

template <>
struct Element<DType::float16> {
  using Storage = std::uint16_t;
  static MLA_HOST_DEVICE float load(Storage bits) { return half_to_float(bits); }
  static MLA_HOST_DEVICE Storage store(float value) { return float_to_half(value); }
};

template <>
struct Element<DType::bfloat16> {
  using Storage = std::uint16_t;
  static MLA_HOST_DEVICE float load(Storage bits) { return bf16_to_float(bits); }
  static MLA_HOST_DEVICE Storage store(float value) { return float_to_bf16(value); }
};

template <>
struct Element<DType::float8_e4m3> {
  using Storage = std::uint8_t;
  static MLA_HOST_DEVICE float load(Storage code) { return fp8_e4m3_to_float(code); }
  static MLA_HOST_DEVICE Storage store(float value) { return float_to_fp8_e4m3(value); }
};

// log2(e) in fp32: the flash kernels scale scores by scale * log2e and use
// exp2, and convert their LSE back to the natural log (docs/contract.md §2).
inline constexpr float log2e = 1.4426950408889634f;

// Exclusive end of the keys that query `row` (0-based within its sequence of
// seqlen_q queries and seqlen_k keys) sees: all of them without `causal`;
// with it the mask is aligned bottom-right (docs/contract.md §1), so the
// last query sees every key and, with fewer keys than queries, the first
// seqlen_q - seqlen_k queries see none.
template <class Int>
MLA_HOST_DEVICE constexpr Int causal_key_end(Int row, Int seqlen_q, Int seqlen_k, bool causal) {
  if (!causal) return seqlen_k;
  const Int end = row + 1 + seqlen_k - seqlen_q;
  return end < 0 ? Int{0} : (end > seqlen_k ? seqlen_k : end);
}

}  // namespace mla::numeric
