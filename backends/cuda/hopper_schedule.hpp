// The persistent grid of a HOPPER_FLASH launch: as many blocks as the device
// has SMs (one block fills an SM), never more than there are tiles. Plain
// C++, shared by the CUDA and the emulated launcher.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
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

// Heads are grouped up to `max_group` (hopper_config.hpp, l2_max_head_group).
// Raises Error(invalid_argument) naming `kernel` when the tiles overflow the
// kernel's int indices.
inline PersistentGrid persistent_grid(const gpu::FlashParams& params, int multiprocessors, int max_group,
                                      const std::string& kernel) {
  PersistentGrid grid;
  const std::int64_t tiles = static_cast<std::int64_t>(params.num_work) * params.num_heads;
  if (tiles == 0) return grid;
  if (tiles > INT_MAX / 2) {
    raise(ErrorCategory::invalid_argument,
          kernel + ": " + std::to_string(tiles) +
              " (query tile, head) pairs exceed the schedule's range; split the batch");
  }
  grid.schedule.total_tiles = static_cast<int>(tiles);
  grid.schedule.head_group = head_group(params.num_heads, max_group);
  grid.blocks = static_cast<int>(std::min<std::int64_t>(tiles, std::max(multiprocessors, 1)));
  return grid;
}

}  // namespace mla::hopper_flash
