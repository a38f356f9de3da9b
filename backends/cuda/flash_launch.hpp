// The CUDA_FLASH kernels as the backend sees them: one entry that dispatches
// on dtype, head dims and causality to the compiled instantiations. Plain C++:
// no CUDA header, so the backend class compiles with the host compiler.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::cuda_flash {

using gpu::FlashParams;

// Whether a kernel was compiled for (dtype, dqk, dv).
bool has_flash_kernel(DType dtype, int head_dim_qk, int head_dim_v);

// Enqueues the attention on `queue`'s stream (a CUDA queue). Raises
// Error(not_supported) when no kernel exists for the combination or the
// device's shared memory is too small, and Error(device) naming the kernel
// when the launch fails.
// params.causal picks the causal or the non-causal instantiation.
void launch_flash_attention(Queue& queue, const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v);

}  // namespace mla::cuda_flash
