// CUDA_FLASH's up-projection run by the emulator: the tensor-core kernel for
// bf16 and fp16 keys and values, the shared SIMT kernel for float32.
#pragma once

#include "mla/backend/latents.hpp"

namespace mla::simt {

// The arguments must have passed check_latent_projection.
void project_latents_mma_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                  const TensorView& v);

}  // namespace mla::simt
