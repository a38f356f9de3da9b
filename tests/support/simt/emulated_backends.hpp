// CUDA_FLASH and HIP_FLASH as the tests run them without a GPU: the real
// backend class (backends/cuda_hip/gpu_flash_backend.cpp) with a third
// FlashVendor whose launches go to the emulator. Memory is host memory and
// the queue is the host queue; everything else (entry checks, validation,
// prepare's metadata upload and work lists, the kernels, the merge kernel,
// fp8 output) is the code a GPU build runs.
#pragma once

#include "mla/backend.hpp"
#include "simt/hip_flash_emulated.hpp"

namespace mla::simt {

// The registry entry of emulated CUDA_FLASH ("CUDA_FLASH (emulated)"): the
// dtypes and dims of the real entry, any device, always available.
BackendEntry emulated_cuda_flash_entry();

// The same for HIP_FLASH on `target`'s MFMA forms and tile rows; unavailable, with the
// reason, when the build had no clang to compile the kernel.
BackendEntry emulated_hip_flash_entry(AmdTarget target = AmdTarget::gfx90a);

}  // namespace mla::simt
