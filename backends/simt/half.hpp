// IEEE binary16 <-> float on the host, bit-exact with round to nearest even:
// what the emulated __float2half_rn, __floats2half2_rn and the MMA/MFMA inputs
// use. Integer operations only, so every host compiler gives the same bits.
#pragma once

#include <cstdint>
#include <cstring>

namespace mla::simt {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {
    // Subnormal: normalise.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::uint16_t float_to_half(float value) {
  std::uint32_t x = 0;
  std::memcpy(&x, &value, sizeof x);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // quiet NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a subnormal half on a grid of 2^-24, round to nearest even.
    if (magnitude < 0x33000000u) return sign;  // below half of the smallest subnormal
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // value / 2^-24 = mantissa * 2^(exponent - 126)
    const std::uint32_t kept = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    const std::uint32_t rounded = kept + ((rest > halfway || (rest == halfway && (kept & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | rounded);
  }
  // Normal: keep 10 of 23 mantissa bits, round to nearest even; a carry moves
  // into the exponent. Rebias 127 -> 15.
  const std::uint32_t lsb = (magnitude >> 13) & 1u;
  const std::uint32_t rounded = (magnitude + 0xfffu + lsb) >> 13;
  return static_cast<std::uint16_t>(sign | (rounded - (112u << 10)));
}

}  // namespace mla::simt
