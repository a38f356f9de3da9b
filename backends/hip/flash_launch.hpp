// The HIP_FLASH kernels as the backend sees them: one entry that dispatches on
// dtype and head dims to the compiled instantiations. Plain C++: no HIP
// header, so the backend class compiles with the host compiler.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash {

using gpu::FlashParams;

// Whether a kernel was compiled for (dtype, dqk, dv).
bool has_flash_kernel(DType dtype, int head_dim_qk, int head_dim_v);

// Enqueues the attention on `queue`'s stream (a HIP queue on a wave64 MFMA
// device). Raises Error(not_supported) when no kernel exists for the
// combination or the device does not fit, and Error(device) naming the
// kernel when the launch fails. An empty work list enqueues nothing.
void launch_flash_attention(Queue& queue, const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v);

}  // namespace mla::hip_flash
