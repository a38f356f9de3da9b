// The <<<>>> launch of the HIP_FLASH kernel from its recipe
// (flash_launch_recipe.hpp) and its launch error. Included only by
// flash_instantiate.hpp.
#pragma once

#include "cuda_hip/gpu_runtime.hpp"
#include "flash_instances.hpp"
#include "flash_kernel.hpp"
#include "flash_launch_recipe.hpp"

namespace mla::hip_flash {

template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  const FlashLaunch launch = plan_flash_launch<D, HeadDimQk, HeadDimV, Family>(params);
  if (launch.empty()) return;
  const dim3 grid(launch.grid[0], launch.grid[1], launch.grid[2]);
  flash_forward_kernel<D, HeadDimQk, HeadDimV, Family><<<grid, launch.threads, 0, stream>>>(params);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

}  // namespace mla::hip_flash
