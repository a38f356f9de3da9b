// CUDA_FLASH's kernel chooser (backends/cuda_hip/kernel_choice.hpp) over its
// tile table and device predicate.
#pragma once

#include "cuda/capability.hpp"
#include "cuda/flash_config.hpp"
#include "cuda_hip/kernel_choice.hpp"

namespace mla::cuda_flash {

inline gpu::KernelChoice choose_kernel(const gpu::KernelRequest& request) {
  gpu::TableRow row;
  if (const FlashTileConfig* tile = find_flash_tile_config(request.dims.qk_head_dim(), request.dims.v_head_dim)) {
    row = {true, {tile->head_dim_qk, tile->head_dim_v, tile->block_rows, tile->block_cols}, tile->shared_bytes()};
  }
  const auto refusal = [&request](const DeviceCapability& device) {
    return request.dtype == DType::float8_e4m3 ? e4m3_device_gap(device) : device_gap(device);
  };
  return gpu::choose_from_table(request, row, refusal, "shared memory", true);
}

}  // namespace mla::cuda_flash
