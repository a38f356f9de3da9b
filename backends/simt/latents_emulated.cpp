// The gather and up-projection kernels of backends/cuda_hip, compiled by the
// host compiler and launched through the emulator: the same planning (dtype
// dispatch, grid) as the CUDA and HIP builds, only the launch differs.
#include "simt/latents_emulated.hpp"

#include "cuda_hip/latent_kernels.hpp"
#include "simt/emulator.hpp"

namespace mla::simt {
namespace {

struct EmulatedLaunch {
  template <class Kernel, class Params>
  void operator()(Kernel kernel, const emulated::latent_kernel::LatentLaunch& how, const Params& params) const {
    LaunchConfig config;
    config.kernel = how.name;
    config.grid.x = how.grid_x;
    config.grid.y = how.grid_y;
    config.block.x = how.block_x;
    config.block.y = how.block_y;
    launch(config, [&] { kernel(params); });
  }
};

}  // namespace

void gather_latents_emulated(const LatentGather& gather, const TensorView& latents, const TensorView& k) {
  emulated::latent_kernel::gather_latents_with(gather, latents, k, EmulatedLaunch{});
}

void project_latents_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                              const TensorView& v) {
  emulated::latent_kernel::project_latents_with(latents, kv_b_proj, k, v, EmulatedLaunch{});
}

}  // namespace mla::simt
