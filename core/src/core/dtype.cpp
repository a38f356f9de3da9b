#include "mla/tensor.hpp"

#include <string>

#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"

namespace mla {

std::string_view cache_format_name(CacheFormat format) {
  switch (format) {
    case CacheFormat::plain:
      return "plain";
    case CacheFormat::fp8_ds_mla:
      return "fp8_ds_mla";
    case CacheFormat::mxfp8_ds_mla:
      return "mxfp8_ds_mla";
  }
  return "unknown";
}

std::int64_t cache_record_bytes(CacheFormat format) {
  switch (format) {
    case CacheFormat::plain:
      return 0;
    case CacheFormat::fp8_ds_mla:
      return 656;  // 512 e4m3 + 4 float32 scales + 64 bfloat16
    case CacheFormat::mxfp8_ds_mla:
      return 528;  // 512 e4m3 + 16 ue8m0 scales
  }
  return 0;
}

std::string cache_format_refusal(CacheFormat format, std::int64_t latent, std::int64_t rope) {
  const std::string got = "; got " + std::to_string(latent) + " and " + std::to_string(rope);
  switch (format) {
    case CacheFormat::plain:
      return {};
    case CacheFormat::fp8_ds_mla:
      if (latent == 512 && rope == 64) return {};
      return "fp8_ds_mla holds 512 latents and 64 rope values" + got;
    case CacheFormat::mxfp8_ds_mla:
      if (latent + rope == 512 && latent % 32 == 0 && rope > 0) return {};
      return "mxfp8_ds_mla holds 512 values, latents then rope, the latents a whole number of 32-value groups" + got;
  }
  return "unknown cache format";
}

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

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::float32:
      return value;
    case DType::float16:
      return numeric::half_to_float(numeric::float_to_half(value));
    case DType::bfloat16:
      return numeric::bf16_to_float(numeric::float_to_bf16(value));
    case DType::float8_e4m3:
      return numeric::fp8_e4m3_to_float(numeric::float_to_fp8_e4m3(value));
  }
  return value;
}

float load_as_float(const void* data, DType dtype, std::int64_t index) {
  switch (dtype) {
    case DType::float32:
      return static_cast<const float*>(data)[index];
    case DType::float16:
      return numeric::half_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::bfloat16:
      return numeric::bf16_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::float8_e4m3:
      return numeric::fp8_e4m3_to_float(static_cast<const std::uint8_t*>(data)[index]);
  }
  return 0.0f;
}

void store_from_float(void* data, DType dtype, std::int64_t index, float value) {
  switch (dtype) {
    case DType::float32:
      static_cast<float*>(data)[index] = value;
      return;
    case DType::float16:
      static_cast<std::uint16_t*>(data)[index] = numeric::float_to_half(value);
      return;
    case DType::bfloat16:
      static_cast<std::uint16_t*>(data)[index] = numeric::float_to_bf16(value);
      return;
    case DType::float8_e4m3:
      static_cast<std::uint8_t*>(data)[index] = numeric::float_to_fp8_e4m3(value);
      return;
  }
}

}  // namespace mla
