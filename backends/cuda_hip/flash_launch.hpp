// The flash-attention kernels as the backend class sees them, declared once
// for both vendors: each vendor's dispatch (cuda/flash_dispatch.cu,
// hip/flash_dispatch.hip) defines it in its namespace (gpu_namespace.hpp),
// mla::cuda or mla::hip. Plain C++: no vendor header, so the backend class
// compiles with the host compiler.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_namespace.hpp"
#include "cuda_hip/kernel_choice.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::MLA_GPU_NAMESPACE {

// Enqueues the attention kernel `kernel` names (the chooser's answer, which
// the backend has checked against the queue's device) in `dtype` on
// `queue`'s stream; params.causal picks the causal or the non-causal form.
// Raises Error(device) naming the kernel when the launch fails. An empty
// work list enqueues nothing.
void launch_flash_attention(Queue& queue, const gpu::FlashParams& params, DType dtype, const gpu::KernelTile& kernel);

}  // namespace mla::MLA_GPU_NAMESPACE
