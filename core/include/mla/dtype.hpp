// Element types and the scalar conversions every backend shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mla {

enum class DType { float32, float16, bfloat16, float8_e4m3 };

// "float32", "float16", "bfloat16", "float8_e4m3" (the names vLLM prints).
std::string_view dtype_name(DType dtype);

// Accepts the names above and the short forms fp32, fp16, bf16, fp8, fp8_e4m3,
// float, half. Unknown names raise Error(invalid_argument) listing the valid ones.
DType parse_dtype(std::string_view name);

std::size_t dtype_size(DType dtype);

// Bit-exact IEEE-754 binary16 conversions, round to nearest even.
std::uint16_t float_to_half_bits(float value);
float half_bits_to_float(std::uint16_t bits);

// bfloat16: the top 16 bits of binary32, round to nearest even; NaN stays NaN.
std::uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(std::uint16_t bits);

// OCP float8 e4m3fn (no infinities, max 448). Conversion saturates to +-448, as
// vLLM's static fp8 output quantisation does; NaN maps to NaN (0x7f).
std::uint8_t float_to_fp8_e4m3_bits(float value);
float fp8_e4m3_bits_to_float(std::uint8_t bits);

// The value `value` takes after a round trip through `dtype` (identity for float32).
float round_to_dtype(float value, DType dtype);

// Reads element `index` of a buffer of `dtype` as float.
float load_as_float(const void* data, DType dtype, std::int64_t index);
// Writes `value` converted to `dtype` into element `index`.
void store_from_float(void* data, DType dtype, std::int64_t index, float value);

}  // namespace mla
