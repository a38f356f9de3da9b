// The HOPPER_FLASH kernels as the backend sees them: one entry that
// dispatches on dtype, head dims and causality to the compiled sm_90a
// instantiations. Plain C++: no CUDA header.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/kernel_choice.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::hopper_flash {

// Enqueues the attention with the kernel `kernel` names (the answer of
// choose_kernel for the queue's device) on `queue`'s stream.
// Host work only besides the launch: the tensor maps are encoded on the host
// and passed by value, nothing is allocated or waited for, so the call can be
// captured into a CUDA graph. Raises Error(invalid_argument) for a layout no tensor map describes, and
// Error(device) naming the kernel when the launch fails.
void launch_hopper_flash(Queue& queue, const gpu::FlashParams& params, DType dtype, const gpu::KernelTile& kernel);

}  // namespace mla::hopper_flash
