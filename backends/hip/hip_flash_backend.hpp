// HIP_FLASH: MFMA flash attention for AMD Instinct (CDNA, wave64). The backend
// class is shared with CUDA_FLASH (backends/cuda_hip/gpu_flash_backend); this
// factory gives it the HIP queue, the tile table, the MFMA kernels and the
// LSE merge of backends/cuda_hip compiled as HIP.
#pragma once

#include <memory>

#include "mla/backend.hpp"

namespace mla::hip_flash {

// Raises Error(not_supported) for a dtype or head dims without a kernel.
std::unique_ptr<PrefillBackend> make_hip_flash_backend(const BackendParams& params);

}  // namespace mla::hip_flash
