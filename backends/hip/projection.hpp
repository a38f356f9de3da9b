// The MLA step's up-projection for HIP_FLASH (PrefillBackend::project_latents).
#pragma once

#include "mla/backend/latents.hpp"

namespace mla::hip_flash {

// bf16 and fp16 keys and values on MFMA (projection_kernel.hpp), float32 on
// the shared SIMT kernel (cuda_hip/latent_kernels.hpp: MFMA's fp32 forms are
// not used). Enqueues one kernel on `queue`'s stream; the arguments must have
// passed check_latent_projection.
void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v);

}  // namespace mla::hip_flash
