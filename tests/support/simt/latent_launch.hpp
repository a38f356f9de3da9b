// Launches a kernel of the MLA step (cuda_hip/latent_kernels.hpp,
// cuda/projection_kernel.cuh) through the emulator, from the LatentLaunch its
// host planning filled in.
#pragma once

#include "cuda_hip/latent_kernels.hpp"
#include "simt/emulator.hpp"

namespace mla::simt {

struct EmulatedLatentLaunch {
  int warp_size = 32;  // the kernels with warp collectives need their vendor's

  template <class Kernel, class Params>
  void operator()(Kernel kernel, const emulated::latent_kernel::LatentLaunch& how, const Params& params) const {
    LaunchConfig config;
    config.kernel = how.name;
    config.grid.x = how.grid_x;
    config.grid.y = how.grid_y;
    config.block.x = how.block_x;
    config.block.y = how.block_y;
    config.warp_size = warp_size;
    launch(config, [&] { kernel(params); });
  }
};

}  // namespace mla::simt
