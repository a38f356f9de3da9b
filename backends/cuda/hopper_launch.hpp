// The recipe of one HOPPER_FLASH launch, built on the host from its
// FlashParams: the tensor maps (q, k and v as 3-D tensors [dim, tokens,
// heads], innermost first, read in boxes of 64 elements x rows x 1 head,
// 128-byte swizzled, or 64-byte for float8_e4m3, whose v map is over the
// transposed copy [column, dv, heads] instead; the output likewise when the
// TMA-store epilogue stores it), the persistent grid (as many blocks as the device has SMs, never more
// than there are tiles) and its schedule, the kernel's name and its dynamic
// shared memory. Plain C++: the CUDA launcher (hopper_launch.cuh) and the
// emulated one (tests/support/simt) follow the same recipe and differ only in
// how they start the blocks.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "cuda/hopper_config.hpp"
#include "cuda/sm90_tensor_map.hpp"
#include "cuda/sm90_tensor_map_check.hpp"
#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace mla::hopper_flash {

// --- The tensor maps ---

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

// The swizzle of a panel of `element_bytes` elements: 64 of them span 128
// bytes of a 16-bit type, 64 of e4m3.
inline cuda_flash::sm90::Swizzle panel_swizzle(int element_bytes) {
  return element_bytes == 1 ? cuda_flash::sm90::Swizzle::bytes64 : cuda_flash::sm90::Swizzle::bytes128;
}

// A tensor of `tokens` rows x `heads` x `dim` elements of `element_bytes`. A
// stride is free when its dim has one entry (the backend checks alignment
// only where it matters), so such strides are replaced by a dense one a map
// accepts.
inline cuda_flash::sm90::TensorMapSpec token_head_spec(const void* base, std::int64_t tokens, std::int64_t row_stride,
                                                       std::int64_t head_stride, int heads, int dim, int box_rows,
                                                       int element_bytes = 2) {
  cuda_flash::sm90::TensorMapSpec spec;
  const auto bytes = static_cast<std::uint64_t>(element_bytes);
  spec.base = base;
  spec.rank = 3;
  spec.element_bytes = element_bytes;
  spec.dims[0] = static_cast<std::uint64_t>(dim);
  spec.dims[1] = static_cast<std::uint64_t>(std::max<std::int64_t>(tokens, 1));
  spec.dims[2] = static_cast<std::uint64_t>(std::max(heads, 1));
  const std::uint64_t dense_row = round_up_16(static_cast<std::uint64_t>(dim) * bytes);
  spec.strides_bytes[0] = tokens > 1 ? static_cast<std::uint64_t>(row_stride) * bytes : dense_row;
  spec.strides_bytes[1] =
      heads > 1 ? static_cast<std::uint64_t>(head_stride) * bytes : spec.strides_bytes[0] * spec.dims[1];
  spec.box[0] = static_cast<std::uint32_t>(panel_elements);
  spec.box[1] = static_cast<std::uint32_t>(box_rows);
  spec.box[2] = 1;
  spec.swizzle = panel_swizzle(element_bytes);
  return spec;
}

// e4m3: the transposed copy of V (hopper_config.hpp, vt_columns) is a tensor
// of dv rows of `columns` bytes per head, read in boxes of 64 key columns x
// every dv row x 1 head.
inline cuda_flash::sm90::TensorMapSpec transposed_v_spec(const void* vt, std::int64_t columns, int heads, int dv) {
  return token_head_spec(vt, dv, columns, columns * dv, heads, static_cast<int>(columns), dv, 1);
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

// Bytes of the transposed copy of V an e4m3 launch of `params` needs.
inline std::size_t transposed_v_bytes(const gpu::FlashParams& params, int head_dim_v) {
  return static_cast<std::size_t>(vt_columns(params.k_tokens, params.batch_size)) *
         static_cast<std::size_t>(head_dim_v) * static_cast<std::size_t>(std::max(params.num_heads, 1));
}

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
// e4m3 inputs (cfg.input_bytes 1): v's map is over `vt`, the transposed
// copy of transposed_v_bytes(p, ...) bytes.
inline HopperMaps make_hopper_maps(const gpu::FlashParams& p, const HopperTileConfig& cfg, bool with_output = false,
                                   const void* vt = nullptr) {
  using detail::operand_map;
  const bool keys = p.k_tokens > 0;
  const int bytes = cfg.input_bytes;
  const void* k = keys ? p.k : p.q;
  const void* v = keys ? p.v : p.q;
  const std::int64_t k_tokens = keys ? p.k_tokens : 1;
  const int v_dim = keys ? cfg.head_dim_v : cfg.head_dim_qk;
  const cuda_flash::sm90::TensorMap q =
      operand_map("q", detail::token_head_spec(p.q, p.q_tokens, p.q_row_stride, p.q_head_stride, p.num_heads,
                                               cfg.head_dim_qk, block_rows, bytes));
  const cuda_flash::sm90::TensorMapSpec v_spec =
      bytes == 1
          ? detail::transposed_v_spec(vt, vt_columns(p.k_tokens, p.batch_size), p.num_heads, cfg.head_dim_v)
          : detail::token_head_spec(v, k_tokens, keys ? p.v_row_stride : p.q_row_stride,
                                    keys ? p.v_head_stride : p.q_head_stride, p.num_heads, v_dim, cfg.block_cols);
  return HopperMaps{
      q,
      operand_map("k", detail::token_head_spec(k, k_tokens, keys ? p.k_row_stride : p.q_row_stride,
                                               keys ? p.k_head_stride : p.q_head_stride, p.num_heads, cfg.head_dim_qk,
                                               cfg.block_cols, bytes)),
      operand_map(bytes == 1 ? "v (transposed)" : "v", v_spec),
      with_output ? operand_map("out", detail::output_spec(p, cfg)) : q,
  };
}

// --- The persistent grid and the recipe ---

struct PersistentGrid {
  int blocks = 0;
  HopperSchedule schedule;
};

// Whether the consumers take turns at the tensor cores (HopperSchedule::
// pingpong) when MLA_HOPPER_PINGPONG does not say. On: on an H200 at
// DeepSeek-V3's shape it gave +3% at 8k and +5-10% at 1k-2k tokens over the
// consumers issuing freely (bench/results/h200-hopper-kv-barriers-2026-11-26.md).
inline constexpr bool default_pingpong = true;

// MLA_HOPPER_PINGPONG=1 or 0 turns the consumers' ping-pong on or off (a
// tuning knob for benchmarks); unset or empty: default_pingpong. Raises
// Error(invalid_argument) for anything else.
inline bool pingpong_setting() {
  return gpu::whole_number_setting("MLA_HOPPER_PINGPONG", 0, 1, default_pingpong ? 1 : 0) != 0;
}

// Whether O goes through shared memory and leaves it by TMA where it can
// (HopperSchedule::tma_store) when MLA_HOPPER_TMA_STORE does not say. Off:
// the epilogue from registers is the one measured on a GPU (bench/results);
// the TMA store has run only under the emulator so far.
inline constexpr bool default_tma_store = false;

// MLA_HOPPER_TMA_STORE=1 or 0 (a tuning knob, as MLA_HOPPER_PINGPONG);
// unset or empty: default_tma_store.
inline bool tma_store_setting() {
  return gpu::whole_number_setting("MLA_HOPPER_TMA_STORE", 0, 1, default_tma_store ? 1 : 0) != 0;
}

// Heads are grouped up to `max_group` (hopper_config.hpp, l2_max_head_group);
// the TMA-store epilogue is taken when the setting asks and the output fits it.
// Raises Error(invalid_argument) naming `kernel` when the tiles overflow the
// kernel's int indices.
inline PersistentGrid persistent_grid(const gpu::FlashParams& params, const HopperTileConfig& cfg, int multiprocessors,
                                      int max_group, const std::string& kernel) {
  PersistentGrid grid;
  const std::int64_t tiles =
      static_cast<std::int64_t>(params.num_work) * params.num_heads * std::max(params.num_splits, 1);
  if (tiles == 0) return grid;
  if (tiles > INT_MAX / 2) {
    raise(ErrorCategory::invalid_argument,
          kernel + ": " + std::to_string(tiles) +
              " (query tile, head) pairs exceed the schedule's range; split the batch");
  }
  grid.schedule.total_tiles = static_cast<int>(tiles);
  grid.schedule.head_group = head_group(params.num_heads, max_group);
  grid.schedule.pingpong = pingpong_setting() ? 1 : 0;
  grid.schedule.tma_store = tma_store_setting() && tma_store_fits(params, cfg) ? 1 : 0;
  grid.blocks = static_cast<int>(std::min<std::int64_t>(tiles, std::max(multiprocessors, 1)));
  return grid;
}

// Everything one launch of an instantiation needs but the device's own
// resources: the kernel's name, the persistent grid and schedule (its
// tile_counter left for the launcher), the epilogue, the dynamic shared
// memory and the tensor maps.
struct HopperLaunch {
  std::string kernel;  // "hopper_flash<bfloat16, 192, 128, causal>"
  PersistentGrid grid;
  bool staged = false;  // O leaves shared memory by TMA (HopperSchedule::tma_store)
  std::size_t shared_bytes = 0;
  HopperMaps maps;

  // For the launch error: blocks, tiles, heads per group, shared memory.
  std::string describe(const gpu::FlashParams& params) const {
    return std::to_string(grid.blocks) + " persistent blocks over " + std::to_string(grid.schedule.total_tiles) +
           " tiles (" + std::to_string(params.num_work) + " work items x " + std::to_string(params.num_heads) +
           " heads in groups of " + std::to_string(grid.schedule.head_group) + "), " + std::to_string(shared_bytes) +
           " bytes of shared memory" + (staged ? ", O stored by TMA" : "");
  }
};

// The tile of the <HeadDimQk, HeadDimV> instantiation for these inputs.
template <int HeadDimQk, int HeadDimV>
constexpr HopperTileConfig launch_tile(bool e4m3_inputs) {
  return HopperTile<HeadDimQk, HeadDimV>::value.with_input_bytes(e4m3_inputs ? 1 : 2);
}

// The recipe of the <dtype, HeadDimQk, HeadDimV, Causal> instantiation for
// `params` on `multiprocessors` SMs with heads grouped up to `max_group`
// (dtype: the output's; the inputs' too unless params.e4m3_inputs, whose v
// map is over `vt`, the transposed copy). grid.blocks == 0: nothing to launch
// (and no maps). Raises as persistent_grid and make_hopper_maps do.
template <int HeadDimQk, int HeadDimV, bool Causal>
HopperLaunch plan_hopper_launch(const gpu::FlashParams& params, DType dtype, int multiprocessors, int max_group,
                                const void* vt = nullptr) {
  const HopperTileConfig cfg = launch_tile<HeadDimQk, HeadDimV>(params.e4m3_inputs);
  HopperLaunch launch;
  const std::string types =
      params.e4m3_inputs ? "float8_e4m3 -> " + std::string(dtype_name(dtype)) : std::string(dtype_name(dtype));
  launch.kernel = "hopper_flash<" + types + ", " + std::to_string(HeadDimQk) + ", " + std::to_string(HeadDimV) +
                  (Causal ? ", causal>" : ", non-causal>");
  launch.grid = persistent_grid(params, cfg, multiprocessors, max_group, launch.kernel);
  if (launch.grid.blocks == 0) return launch;
  launch.staged = launch.grid.schedule.tma_store != 0;
  launch.shared_bytes = cfg.shared_bytes(launch.staged);
  if (params.e4m3_inputs && vt == nullptr) {
    raise(ErrorCategory::internal, launch.kernel + ": no transposed copy of v for e4m3 inputs");
  }
  launch.maps = make_hopper_maps(params, cfg, launch.staged, vt);
  return launch;
}

// The grid of transpose_v_e4m3 (hopper_kernel.cuh) for `params`: blocks of
// vt_block_columns columns x heads, head_dim_v threads each.
struct TransposeGrid {
  std::int64_t columns = 0;
  unsigned blocks_x = 0;
  unsigned heads = 0;
  unsigned threads = 0;
};

inline TransposeGrid transpose_grid(const gpu::FlashParams& params, int head_dim_v) {
  TransposeGrid grid;
  grid.columns = vt_columns(params.k_tokens, params.batch_size);
  grid.blocks_x = static_cast<unsigned>(grid.columns / vt_block_columns);
  grid.heads = static_cast<unsigned>(std::max(params.num_heads, 1));
  grid.threads = static_cast<unsigned>(head_dim_v);
  return grid;
}

}  // namespace mla::hopper_flash
