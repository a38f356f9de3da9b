// The HOPPER_FLASH kernel source run by the emulator (hopper_flash_emulated.cpp)
// and its registry entry, "HOPPER_FLASH (emulated)": the real backend class
// with the host queue, as emulated_backends.hpp does for CUDA_FLASH.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "mla/backend.hpp"
#include "mla/tensor.hpp"

namespace mla::simt {

// Persistent blocks of an emulated launch: fewer than the tiles of most test
// problems, so that blocks walk several tiles and the pipeline's barrier
// phases carry from one tile to the next as on the GPU.
inline constexpr int hopper_emulated_blocks = 3;

// Runs hopper_flash::hopper_flash_kernel<dtype, qk, v, params.causal> over a
// persistent grid of hopper_emulated_blocks blocks with the tensor maps the
// real launcher builds. Raises Error(not_supported) for dims without a tile
// and Error(device) for a hazard.
void launch_hopper_flash_emulated(const gpu::FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v);

BackendEntry emulated_hopper_flash_entry();

}  // namespace mla::simt
