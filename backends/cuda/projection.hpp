// The MLA step's up-projection for CUDA_FLASH (PrefillBackend::project_latents):
// tensor cores (projection_kernel.cuh) for bf16 and fp16 keys and values, the
// shared SIMT kernel (cuda_hip/latent_kernels.hpp) for float32.
#pragma once

#include "mla/backend/latents.hpp"

namespace mla::cuda_flash {

// Enqueues one kernel on `queue`'s stream; the arguments must have passed
// check_latent_projection.
void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v);

}  // namespace mla::cuda_flash
