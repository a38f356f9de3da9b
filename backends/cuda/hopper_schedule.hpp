// The persistent grid of a HOPPER_FLASH launch: as many blocks as the device
// has SMs (one block fills an SM), never more than there are tiles; and the
// launch recipe built on it. Plain C++, shared by the CUDA launcher
// (hopper_kernel_launch.cuh) and the emulated one (backends/simt), which
// differ only in how they start the blocks.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "cuda/hopper_config.hpp"
#include "cuda/hopper_kernel_params.hpp"
#include "cuda/hopper_maps.hpp"
#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace mla::hopper_flash {

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

// The recipe of the <dtype, HeadDimQk, HeadDimV, Causal> instantiation for
// `params` on `multiprocessors` SMs with heads grouped up to `max_group`.
// grid.blocks == 0: nothing to launch (and no maps). Raises as
// persistent_grid and make_hopper_maps do.
template <int HeadDimQk, int HeadDimV, bool Causal>
HopperLaunch plan_hopper_launch(const gpu::FlashParams& params, DType dtype, int multiprocessors, int max_group) {
  constexpr HopperTileConfig cfg = HopperTile<HeadDimQk, HeadDimV>::value;
  HopperLaunch launch;
  launch.kernel = "hopper_flash<" + std::string(dtype_name(dtype)) + ", " + std::to_string(HeadDimQk) + ", " +
                  std::to_string(HeadDimV) + (Causal ? ", causal>" : ", non-causal>");
  launch.grid = persistent_grid(params, cfg, multiprocessors, max_group, launch.kernel);
  if (launch.grid.blocks == 0) return launch;
  launch.staged = launch.grid.schedule.tma_store != 0;
  launch.shared_bytes = cfg.shared_bytes(launch.staged);
  launch.maps = make_hopper_maps(params, cfg, launch.staged);
  return launch;
}

}  // namespace mla::hopper_flash
