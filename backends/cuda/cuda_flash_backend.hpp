// CUDA_FLASH: tensor-core flash attention for NVIDIA sm_80 and newer. The
// backend class is shared with HIP_FLASH (backends/cuda_hip/gpu_flash_backend);
// this factory gives it the CUDA queue, the sm_80 check, the tile table and
// the CUDA kernels.
#pragma once

#include <memory>

#include "mla/backend.hpp"

namespace mla::cuda_flash {

// Raises Error(not_supported) for a dtype or head dims without a kernel.
std::unique_ptr<PrefillBackend> make_cuda_flash_backend(const BackendParams& params);

}  // namespace mla::cuda_flash
