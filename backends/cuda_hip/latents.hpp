// The MLA step's gather and up-projection (mla/latents.hpp) on a GPU queue.
// Vendor-neutral declaration: the CUDA and the HIP backend call them from
// plain C++; the kernels live in latent_kernels.hpp, launched by latents.cu,
// compiled once per vendor.
#pragma once

#include <optional>

#include "gpu_namespace.hpp"
#include "mla/backend/latents.hpp"

namespace mla::MLA_GPU_NAMESPACE {

// Enqueue one kernel each on `queue`'s stream; the arguments must have
// passed check_latent_gather / check_latent_projection.
void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k);
void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v);
// The FP8 attention mode's quantisation (PrefillBackend::quantise_e4m3):
// one or two kernels on the queue's stream (amax_kernel, then
// quantise_kernel), s found in scratch[1] when `scale` is absent.
void quantise_e4m3(Queue& queue, const TensorView& from, const TensorView& to, std::optional<float> scale,
                   float* scratch);

}  // namespace mla::MLA_GPU_NAMESPACE
