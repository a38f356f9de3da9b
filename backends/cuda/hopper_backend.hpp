// HOPPER_FLASH: the sm_90a flash-attention kernel (hopper_kernel.cuh) inside
// the GPU backend class CUDA_FLASH and HIP_FLASH share
// (backends/cuda_hip/gpu_flash_backend): the CUDA queue, the 9.0-only device
// check, its tile table and launcher; the merge, gather and up-projection
// kernels are CUDA_FLASH's.
#pragma once

#include <memory>

#include "mla/backend.hpp"

namespace mla::hopper_flash {

// Raises Error(not_supported) for a dtype or head dims without a kernel.
std::unique_ptr<PrefillBackend> make_hopper_flash_backend(const BackendParams& params);

}  // namespace mla::hopper_flash
