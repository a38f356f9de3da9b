// Internal: decoding one value of a grouped cache record (CacheFormat,
// docs/contract.md §13), shared by the host gather, the GPU gather kernel
// and the GPU emulator. A value is its e4m3 code times its group's scale,
// multiplied in float32 (one rounding); fp8_ds_mla's rope values are
// bfloat16 as stored.
#pragma once

#include <cstdint>

#include "mla/detail/numeric.hpp"

namespace mla::numeric {

// Where a record's parts lie.
inline constexpr int ds_mla_values = 512;       // e4m3 values of both formats
inline constexpr int fp8_ds_mla_group = 128;    // latents per float32 scale
inline constexpr int fp8_ds_mla_rope_at = 528;  // bytes before the bfloat16 rope values
inline constexpr int mxfp8_ds_mla_group = 32;   // values per ue8m0 scale

// R, the rope values of a cache row: a plain row's `row_width` elements
// past the `latent` latents; a grouped record's by its format.
MLA_HOST_DEVICE inline std::int64_t cache_rope_width(CacheFormat format, std::int64_t row_width, std::int64_t latent) {
  if (format == CacheFormat::fp8_ds_mla) return 64;
  if (format == CacheFormat::mxfp8_ds_mla) return ds_mla_values - latent;
  return row_width - latent;
}

// 2^(code - 127) as float32 (code 0: 2^-127, a subnormal); 255 is NaN.
MLA_HOST_DEVICE inline float ue8m0_to_float(std::uint8_t code) {
  if (code == 0xffu) return float_from_bits(0x7fc00000u);
  if (code == 0u) return float_from_bits(0x00400000u);
  return float_from_bits(static_cast<std::uint32_t>(code) << 23);
}

// Value `index` of a record (latents first, then rope): index < L + R.
MLA_HOST_DEVICE inline float decode_cache_value(CacheFormat format, const std::uint8_t* record, std::int64_t index) {
  if (format == CacheFormat::fp8_ds_mla) {
    if (index >= ds_mla_values) {
      const std::uint8_t* at = record + fp8_ds_mla_rope_at + 2 * (index - ds_mla_values);
      return bf16_to_float(static_cast<std::uint16_t>(at[0] | (at[1] << 8)));
    }
    const std::uint8_t* s = record + ds_mla_values + 4 * (index / fp8_ds_mla_group);
    const std::uint32_t bits = static_cast<std::uint32_t>(s[0]) | (static_cast<std::uint32_t>(s[1]) << 8) |
                               (static_cast<std::uint32_t>(s[2]) << 16) | (static_cast<std::uint32_t>(s[3]) << 24);
    return fp8_e4m3_to_float(record[index]) * float_from_bits(bits);
  }
  // mxfp8_ds_mla
  return fp8_e4m3_to_float(record[index]) * ue8m0_to_float(record[ds_mla_values + index / mxfp8_ds_mla_group]);
}

}  // namespace mla::numeric
