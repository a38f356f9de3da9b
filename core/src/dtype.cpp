#include "mla/dtype.hpp"

#include <bit>
#include <cmath>
#include <string>

#include "mla/error.hpp"

namespace mla {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "float32";
    case DType::float16:
      return "float16";
    case DType::bfloat16:
      return "bfloat16";
    case DType::float8_e4m3:
      return "float8_e4m3";
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  if (name == "float32" || name == "fp32" || name == "float") return DType::float32;
  if (name == "float16" || name == "fp16" || name == "half") return DType::float16;
  if (name == "bfloat16" || name == "bf16") return DType::bfloat16;
  if (name == "float8_e4m3" || name == "fp8" || name == "fp8_e4m3") return DType::float8_e4m3;
  raise(ErrorCategory::invalid_argument, "Unknown dtype: '" + std::string(name) +
                                             "'. Valid options are: float32 (fp32), float16 (fp16), "
                                             "bfloat16 (bf16), float8_e4m3 (fp8)");
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 4;
    case DType::float16:
    case DType::bfloat16:
      return 2;
    case DType::float8_e4m3:
      return 1;
  }
  return 0;
}

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN; keep NaN quiet
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u : 0u));
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Scale into the subnormal grid (units of 2^-24) with round to nearest even.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24, exact
    const float rounded = std::nearbyint(scaled);                  // default mode: ties to even
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(rounded));
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t bits = abs - 0x38000000u;  // exponent bias 127 -> 15
  const std::uint32_t lsb = (bits >> 13) & 1u;
  bits += 0x0fffu + lsb;
  return static_cast<std::uint16_t>(sign | (bits >> 13));
}

float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t float_to_bf16_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  }
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::uint8_t float_to_fp8_e4m3_bits(float value) {
  if (std::isnan(value)) return 0x7f;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  float magnitude = std::fabs(value);
  if (magnitude >= 448.0f) return static_cast<std::uint8_t>(sign | 0x7e);  // saturate to 448
  if (magnitude < 0.015625f) {                                             // below 2^-6: subnormal grid of 2^-9
    const float units = std::nearbyint(magnitude * 512.0f);
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(units));
  }
  int exponent = 0;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
  // 3 mantissa bits: the value on the grid of 2^(exponent-4).
  float units = std::nearbyint(fraction * 16.0f);  // in [8, 16]
  if (units == 16.0f) {
    units = 8.0f;
    ++exponent;
  }
  const int biased = exponent - 1 + 7;
  const auto code = static_cast<std::uint8_t>((biased << 3) | (static_cast<int>(units) - 8));
  if (code >= 0x7f) return static_cast<std::uint8_t>(sign | 0x7e);
  return static_cast<std::uint8_t>(sign | code);
}

float fp8_e4m3_bits_to_float(std::uint8_t bits) {
  const bool negative = (bits & 0x80) != 0;
  const int exponent = (bits >> 3) & 0x0f;
  const int mantissa = bits & 0x07;
  if (exponent == 0x0f && mantissa == 0x07) return std::nanf("");
  float magnitude = 0.0f;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 7 - 3);
  }
  return negative ? -magnitude : magnitude;
}

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::float32:
      return value;
    case DType::float16:
      return half_bits_to_float(float_to_half_bits(value));
    case DType::bfloat16:
      return bf16_bits_to_float(float_to_bf16_bits(value));
    case DType::float8_e4m3:
      return fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(value));
  }
  return value;
}

float load_as_float(const void* data, DType dtype, std::int64_t index) {
  switch (dtype) {
    case DType::float32:
      return static_cast<const float*>(data)[index];
    case DType::float16:
      return half_bits_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::bfloat16:
      return bf16_bits_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::float8_e4m3:
      return fp8_e4m3_bits_to_float(static_cast<const std::uint8_t*>(data)[index]);
  }
  return 0.0f;
}

void store_from_float(void* data, DType dtype, std::int64_t index, float value) {
  switch (dtype) {
    case DType::float32:
      static_cast<float*>(data)[index] = value;
      return;
    case DType::float16:
      static_cast<std::uint16_t*>(data)[index] = float_to_half_bits(value);
      return;
    case DType::bfloat16:
      static_cast<std::uint16_t*>(data)[index] = float_to_bf16_bits(value);
      return;
    case DType::float8_e4m3:
      static_cast<std::uint8_t*>(data)[index] = float_to_fp8_e4m3_bits(value);
      return;
  }
}

}  // namespace mla
