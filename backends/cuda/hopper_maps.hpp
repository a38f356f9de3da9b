// The tensor maps of one HOPPER_FLASH launch, built on the host from the
// launch's FlashParams: q, k and v as 3-D tensors [dim, tokens, heads]
// (innermost first) with their row and head strides, read in boxes of
// 64 elements x rows x 1 head, 128-byte swizzled (hopper_config.hpp); the
// output likewise when the TMA-store epilogue stores it.
// Plain C++: the CUDA launcher and the emulated launcher build the same maps.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/hopper_config.hpp"
#include "cuda/sm90_tensor_map.hpp"
#include "cuda/sm90_tensor_map_check.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/error.hpp"

namespace mla::hopper_flash {

struct HopperMaps {
  cuda_flash::sm90::TensorMap q;
  cuda_flash::sm90::TensorMap k;
  cuda_flash::sm90::TensorMap v;
  // The output [dv, tokens, heads] in boxes of 64 x 64 rows x 1 head, when
  // the launch stores O with TMA; otherwise a copy of q's map, never used.
  cuda_flash::sm90::TensorMap o;
};

namespace detail {

inline std::uint64_t round_up_16(std::uint64_t bytes) { return (bytes + 15) / 16 * 16; }

// A tensor of `tokens` rows x `heads` x `dim` 16-bit elements. A stride is
// free when its dim has one entry (the backend checks alignment only where it
// matters), so such strides are replaced by a dense one a map accepts.
inline cuda_flash::sm90::TensorMapSpec token_head_spec(const void* base, std::int64_t tokens, std::int64_t row_stride,
                                                       std::int64_t head_stride, int heads, int dim, int box_rows) {
  cuda_flash::sm90::TensorMapSpec spec;
  spec.base = base;
  spec.rank = 3;
  spec.element_bytes = 2;
  spec.dims[0] = static_cast<std::uint64_t>(dim);
  spec.dims[1] = static_cast<std::uint64_t>(std::max<std::int64_t>(tokens, 1));
  spec.dims[2] = static_cast<std::uint64_t>(std::max(heads, 1));
  const std::uint64_t dense_row = round_up_16(static_cast<std::uint64_t>(dim) * 2);
  spec.strides_bytes[0] = tokens > 1 ? static_cast<std::uint64_t>(row_stride) * 2 : dense_row;
  spec.strides_bytes[1] =
      heads > 1 ? static_cast<std::uint64_t>(head_stride) * 2 : spec.strides_bytes[0] * spec.dims[1];
  spec.box[0] = static_cast<std::uint32_t>(panel_elements);
  spec.box[1] = static_cast<std::uint32_t>(box_rows);
  spec.box[2] = 1;
  spec.swizzle = cuda_flash::sm90::Swizzle::bytes128;
  return spec;
}

// The output [dv, tokens, heads] in boxes of 64 x 64 rows (one consumer's).
inline cuda_flash::sm90::TensorMapSpec output_spec(const gpu::FlashParams& p, const HopperTileConfig& cfg) {
  return token_head_spec(p.out, p.q_tokens, p.out_row_stride, p.out_head_stride, p.num_heads, cfg.head_dim_v,
                         rows_per_consumer);
}

// make_tensor_map for one operand, its errors prefixed with the backend and
// the operand ("HOPPER_FLASH: the tensor map of k: make_tensor_map: ...").
inline cuda_flash::sm90::TensorMap operand_map(const char* operand, const cuda_flash::sm90::TensorMapSpec& spec) {
  try {
    return cuda_flash::sm90::make_tensor_map(spec);
  } catch (const Error& error) {
    raise(error.category(), std::string("HOPPER_FLASH: the tensor map of ") + operand + ": " + error.what());
  }
}

}  // namespace detail

// Whether the TMA-store epilogue can store this launch's output: q's dtype
// (not fp8), no split-KV partials, and a layout a tensor map describes (the
// same limits make_tensor_map checks). Otherwise the kernel stores O from
// registers.
inline bool tma_store_fits(const gpu::FlashParams& p, const HopperTileConfig& cfg) {
  return p.out != nullptr && !p.out_fp8 && p.num_splits <= 1 && p.q_tokens > 0 &&
         cuda_flash::sm90::tensor_map_spec_problem(detail::output_spec(p, cfg)).empty();
}

// Raises Error(invalid_argument) naming the field for a layout TMA cannot
// describe. A launch without keys (every sequence empty on the key side)
// still gets valid k and v maps, over q's memory: no box of them is loaded.
// `with_output`: also the output's map (tma_store_fits(p, cfg) must hold).
inline HopperMaps make_hopper_maps(const gpu::FlashParams& p, const HopperTileConfig& cfg, bool with_output = false) {
  using detail::operand_map;
  const bool keys = p.k_tokens > 0;
  const void* k = keys ? p.k : p.q;
  const void* v = keys ? p.v : p.q;
  const std::int64_t k_tokens = keys ? p.k_tokens : 1;
  const int v_dim = keys ? cfg.head_dim_v : cfg.head_dim_qk;
  const cuda_flash::sm90::TensorMap q =
      operand_map("q", detail::token_head_spec(p.q, p.q_tokens, p.q_row_stride, p.q_head_stride, p.num_heads,
                                               cfg.head_dim_qk, block_rows));
  return HopperMaps{
      q,
      operand_map("k", detail::token_head_spec(k, k_tokens, keys ? p.k_row_stride : p.q_row_stride,
                                               keys ? p.k_head_stride : p.q_head_stride, p.num_heads, cfg.head_dim_qk,
                                               cfg.block_cols)),
      operand_map(
          "v", detail::token_head_spec(v, k_tokens, keys ? p.v_row_stride : p.q_row_stride,
                                       keys ? p.v_head_stride : p.q_head_stride, p.num_heads, v_dim, cfg.block_cols)),
      with_output ? operand_map("out", detail::output_spec(p, cfg)) : q,
  };
}

}  // namespace mla::hopper_flash
