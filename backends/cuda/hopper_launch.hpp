// The HOPPER_FLASH kernels as the backend sees them: one entry that
// dispatches on dtype, head dims and causality to the compiled sm_90a
// instantiations. Plain C++: no CUDA header.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "mla/dtype.hpp"
#include "mla/queue.hpp"

namespace mla::hopper_flash {

// Whether a kernel was compiled for (dtype, dqk, dv).
bool has_hopper_kernel(DType dtype, int head_dim_qk, int head_dim_v);

// Enqueues the attention on `queue`'s stream (a CUDA queue on a 9.0 device).
// Host work only besides the launch: the tensor maps are encoded on the host
// and passed by value, nothing is allocated or waited for, so the call can be
// captured into a CUDA graph. Raises Error(not_supported) for a combination
// without a kernel or a device with too little shared memory,
// Error(invalid_argument) for a layout no tensor map describes, and
// Error(device) naming the kernel when the launch fails.
void launch_hopper_flash(Queue& queue, const gpu::FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v);

}  // namespace mla::hopper_flash
