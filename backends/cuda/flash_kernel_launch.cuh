// The <<<>>> launch of the CUDA_FLASH kernel from its recipe
// (flash_launch_recipe.hpp: name, grid, threads, shared memory): the
// shared-memory opt-in and the launch error. Whether
// the device has the shared memory is the kernel chooser's answer
// (kernel_choice.hpp), asked before the launch. Included only by
// flash_instantiate.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda_hip/gpu_runtime.hpp"
#include "flash_instances.hpp"
#include "flash_kernel.cuh"
#include "flash_launch_recipe.hpp"

namespace mla::cuda_flash {

// Launches one instantiation.
template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  constexpr DType dtype = element_dtype<T>;
  const FlashLaunch launch = plan_flash_launch<HeadDimQk, HeadDimV, Causal>(params, dtype);
  if (launch.blocks == 0) return;
  auto* kernel = &flash_forward_kernel<T, HeadDimQk, HeadDimV, Causal>;
  gpu::set_max_dynamic_shared_memory(kernel, static_cast<int>(launch.shared_bytes), launch.kernel);
  kernel<<<static_cast<unsigned>(launch.blocks), launch.threads, launch.shared_bytes, stream>>>(params);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

}  // namespace mla::cuda_flash
