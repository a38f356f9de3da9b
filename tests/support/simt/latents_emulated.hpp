// The MLA step's gather and up-projection kernels of backends/cuda_hip run by
// the emulator.
#pragma once

#include <optional>

#include "mla/backend/latents.hpp"

namespace mla::simt {

// The arguments must have passed check_latent_gather / check_latent_projection.
void gather_latents_emulated(const LatentGather& gather, const TensorView& latents, const TensorView& k);
void project_latents_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                              const TensorView& v);
// The FP8 attention mode's quantisation (FlashVendor::quantise) on host memory.
void quantise_e4m3_emulated(Queue& queue, const TensorView& from, const TensorView& to, std::optional<float> scale,
                            float* scratch);

}  // namespace mla::simt
