// The persistent grid of a HOPPER_FLASH launch: as many blocks as the device
// has SMs (one block fills an SM), never more than there are tiles. Plain
// C++, shared by the CUDA and the emulated launcher.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/hopper_config.hpp"
#include "cuda/hopper_kernel_params.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/error.hpp"

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
  const char* value = std::getenv("MLA_HOPPER_PINGPONG");
  if (value == nullptr || *value == '\0') return default_pingpong;
  const std::string text(value);
  if (text == "1") return true;
  if (text == "0") return false;
  raise(ErrorCategory::invalid_argument, "MLA_HOPPER_PINGPONG must be 0 or 1; got '" + text + "'");
}

// Heads are grouped up to `max_group` (hopper_config.hpp, l2_max_head_group).
// Raises Error(invalid_argument) naming `kernel` when the tiles overflow the
// kernel's int indices.
inline PersistentGrid persistent_grid(const gpu::FlashParams& params, int multiprocessors, int max_group,
                                      const std::string& kernel) {
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
  grid.blocks = static_cast<int>(std::min<std::int64_t>(tiles, std::max(multiprocessors, 1)));
  return grid;
}

}  // namespace mla::hopper_flash
