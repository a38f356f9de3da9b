// CUDA_FLASH's tensor-core projection (cuda/projection_kernel.cuh), compiled
// by the host compiler against the emulated sm_80 primitives.
#include "simt/projection_emulated.hpp"

#include "cuda/projection_kernel.cuh"
#include "simt/latent_launch.hpp"
#include "simt/latents_emulated.hpp"

namespace mla::simt {

void project_latents_mma_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                  const TensorView& v) {
  if (k.dtype == DType::float32) return project_latents_emulated(latents, kv_b_proj, k, v);
  cuda_flash::projection::project_mma_with(latents, kv_b_proj, k, v, EmulatedLatentLaunch{cuda_flash::warp_threads});
}

}  // namespace mla::simt
