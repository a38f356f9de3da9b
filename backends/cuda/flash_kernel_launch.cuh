// The <<<>>> launch of the CUDA_FLASH kernel: shared-memory opt-in, grid
// size checks and the launch error, named after the instantiation. Whether
// the device has the shared memory is the kernel chooser's answer
// (kernel_choice.hpp), asked before the launch. Included only by
// flash_instantiate.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <string>
#include <type_traits>

#include "cuda_hip/gpu_runtime.hpp"
#include "flash_instances.hpp"
#include "flash_kernel.cuh"

namespace mla::cuda_flash {

template <class T>
constexpr const char* element_name() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return "bfloat16";
  } else {
    return "float16";
  }
}

// Launches one instantiation.
template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  constexpr FlashTileConfig cfg = FlashTile<HeadDimQk, HeadDimV>::value;
  const std::string name = std::string("flash_forward<") + element_name<T>() + ", " + std::to_string(HeadDimQk) + ", " +
                           std::to_string(HeadDimV) + (Causal ? ", causal>" : ", non-causal>");
  const std::int64_t blocks = static_cast<std::int64_t>(params.num_work) * params.num_heads * params.num_splits;
  if (blocks == 0) return;
  if (blocks > INT_MAX) {
    raise(ErrorCategory::invalid_argument,
          name + ": " + std::to_string(blocks) + " thread blocks exceed the grid limit; split the batch");
  }
  auto* kernel = &flash_forward_kernel<T, HeadDimQk, HeadDimV, Causal>;
  gpu::set_max_dynamic_shared_memory(kernel, static_cast<int>(cfg.shared_bytes()), name);
  kernel<<<static_cast<unsigned>(blocks), cfg.threads(), cfg.shared_bytes(), stream>>>(params);
  gpu::check_launch(name, std::to_string(params.num_work) + " work items x " + std::to_string(params.num_heads) +
                              " heads x " + std::to_string(params.num_splits) + " key splits, " +
                              std::to_string(cfg.shared_bytes()) + " bytes of shared memory");
}

}  // namespace mla::cuda_flash
