// HOPPER_FLASH's kernel chooser (backends/cuda_hip/kernel_choice.hpp) over
// its tile table and device predicate: the entry's validate(), the backend's
// planning and every launch ask it.
#pragma once

#include "cuda_hip/kernel_choice.hpp"
#include "hopper_capability.hpp"
#include "hopper_config.hpp"

namespace mla::hopper_flash {

inline gpu::KernelChoice choose_kernel(const gpu::KernelRequest& request) {
  gpu::TableRow row;
  if (const HopperTileConfig* tile = find_hopper_tile_config(request.dims.qk_head_dim(), request.dims.v_head_dim)) {
    row = {true, {tile->head_dim_qk, tile->head_dim_v, block_rows, tile->block_cols}, tile->shared_bytes()};
  }
  return gpu::choose_from_table(request, row, device_gap, "shared memory");
}

}  // namespace mla::hopper_flash
