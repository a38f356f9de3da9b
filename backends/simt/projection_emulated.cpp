// CUDA_FLASH's tensor-core projection (cuda/projection_kernel.cuh), compiled
// by the host compiler against the emulated sm_80 primitives.
#include "simt/projection_emulated.hpp"

#include "cuda/projection_kernel.cuh"
#include "simt/emulator.hpp"
#include "simt/latents_emulated.hpp"

namespace mla::simt {

void project_latents_mma_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                  const TensorView& v) {
  if (k.dtype == DType::float32) return project_latents_emulated(latents, kv_b_proj, k, v);
  cuda_flash::projection::project_mma_with(latents, kv_b_proj, k, v,
                                           [](auto kernel, const emulated::latent_kernel::LatentLaunch& how,
                                              const cuda_flash::projection::ProjectParams& params) {
                                             LaunchConfig config;
                                             config.kernel = how.name;
                                             config.grid.x = how.grid_x;
                                             config.grid.y = how.grid_y;
                                             config.block.x = how.block_x;
                                             config.block.y = how.block_y;
                                             config.warp_size = cuda_flash::warp_threads;
                                             launch(config, [&] { kernel(params); });
                                           });
}

}  // namespace mla::simt
