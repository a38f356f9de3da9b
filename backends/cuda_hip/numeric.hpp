// Bit-exact scalar conversions shared by the GPU kernels and the host tests:
// the same rounding as mla::float_to_bf16_bits and mla::float_to_fp8_e4m3_bits
// in core, written with integer operations so every compiler produces the same
// bits on host and device.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "host_device.hpp"

namespace mla::gpu {

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

MLA_HOST_DEVICE inline float bf16_to_float(std::uint16_t bits) {
  return float_from_bits(static_cast<std::uint32_t>(bits) << 16);
}

// Round to nearest even; NaN stays a quiet NaN.
MLA_HOST_DEVICE inline std::uint16_t float_to_bf16(float value) {
  const std::uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);
}

// OCP e4m3fn: saturates to +-448 (vLLM's static fp8 output), NaN -> 0x7f,
// round to nearest even.
MLA_HOST_DEVICE inline std::uint8_t float_to_fp8_e4m3(float value) {
  constexpr std::uint32_t max_finite_bits = 0x43e00000u;  // 448.0f
  constexpr std::uint32_t min_normal_bits = 0x3c800000u;  // 2^-6, smallest normal e4m3
  const std::uint32_t x = float_bits(value);
  const auto sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7f;
  if (magnitude >= max_finite_bits) return static_cast<std::uint8_t>(sign | 0x7eu);
  if (magnitude < min_normal_bits) {
    // Subnormals sit on a grid of 2^-9; the product is exact, rintf rounds to even.
    const float units = rintf(float_from_bits(magnitude) * 512.0f);
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(units));
  }
  // Keep 3 of the 23 mantissa bits, rounding to nearest even; a carry moves
  // into the exponent by itself. Then rebias the exponent from 127 to 7.
  const std::uint32_t lsb = (magnitude >> 20) & 1u;
  const std::uint32_t rounded = (magnitude + 0x7ffffu + lsb) >> 20;
  const std::uint32_t code = rounded - (120u << 3);
  if (code >= 0x7fu) return static_cast<std::uint8_t>(sign | 0x7eu);
  return static_cast<std::uint8_t>(sign | code);
}

// OCP e4m3fn to float, exactly: 0x7f / 0xff are NaN, exponent 0 holds the
// subnormals (a multiple of 2^-9), the rest are (1 + m/8) * 2^(e-7).
MLA_HOST_DEVICE inline float fp8_e4m3_to_float(std::uint8_t code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t exponent = (code >> 3) & 0xfu;
  const std::uint32_t mantissa = code & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return float_from_bits(sign | 0x7fc00000u);
  if (exponent == 0) return float_from_bits(sign | float_bits(static_cast<float>(mantissa) * (1.0f / 512.0f)));
  return float_from_bits(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

}  // namespace mla::gpu
