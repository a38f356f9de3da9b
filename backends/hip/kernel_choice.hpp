// HIP_FLASH's kernel chooser (backends/cuda_hip/kernel_choice.hpp) over its
// tile table, MFMA targets and wave size.
#pragma once

#include <string>

#include "cuda_hip/kernel_choice.hpp"
#include "hip/capability.hpp"
#include "hip/flash_config.hpp"

namespace mla::hip_flash {

// device_gap, and then the wave size: the kernels are written for 64-lane
// waves, and a wave32 device (RDNA) must never run them, whatever its arch
// is called.
inline std::string wave64_device_gap(const DeviceCapability& device) {
  std::string gap = device_gap(device);
  if (gap.empty() && device.warp_size != mfma::wave_size) {
    gap =
        "needs a wave64 device with MFMA; " + device.describe() + " runs waves of " + std::to_string(device.warp_size);
  }
  return gap;
}

// The row of the request's device generation (tile_family); without a device
// the CDNA1/2 row, whose query rows per block every family shares (the work
// lists), and whose keys per tile only the split-KV heuristic reads.
inline gpu::KernelChoice choose_family_kernel(const gpu::KernelRequest& request, TileFamily family) {
  gpu::TableRow row;
  if (const FlashTileConfig* tile =
          find_flash_tile_config(request.dims.qk_head_dim(), request.dims.v_head_dim, family)) {
    row = {true, {tile->head_dim_qk, tile->head_dim_v, tile->block_rows(), tile->block_cols}, tile->lds_bytes()};
  }
  const auto refusal = [&request](const DeviceCapability& device) {
    std::string gap = wave64_device_gap(device);
    if (gap.empty() && request.dtype == DType::float8_e4m3) gap = e4m3_device_gap(device);
    return gap;
  };
  return gpu::choose_from_table(request, row, refusal, "LDS", true);
}

inline gpu::KernelChoice choose_kernel(const gpu::KernelRequest& request) {
  return choose_family_kernel(request,
                              request.device != nullptr ? tile_family(request.device->arch) : TileFamily::cdna12);
}

}  // namespace mla::hip_flash
