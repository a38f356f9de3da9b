// The CUDA_FLASH kernel source run by the emulator (cuda_flash_emulated.cpp).
#pragma once

#include <vector>

#include "cuda_hip/flash_params.hpp"
#include "mla/tensor.hpp"
#include "simt/emulator.hpp"

namespace mla::simt {

// Runs cuda_flash::flash_forward_kernel<dtype, qk, v, params.causal> over the
// grid the real launcher uses (num_work * num_heads blocks of the tile's
// threads, the tile's dynamic shared memory). Raises Error(not_supported)
// for dims without a tile and Error(device) for a hazard.
void launch_cuda_flash_emulated(const gpu::FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v);

// The global memory a flash launch may read: the q, k and v rows of every
// sequence in its work list (cu_seqlens and the work list are host-readable
// under emulation). Shared with the HIP launcher.
std::vector<MemoryRange> flash_input_ranges(const gpu::FlashParams& params, int head_dim_qk, int head_dim_v);

}  // namespace mla::simt
