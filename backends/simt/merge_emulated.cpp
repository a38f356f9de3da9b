// The LSE merge kernel of backends/cuda_hip, compiled by the host compiler and
// launched through the emulator: the same planning (vector width, grid) as
// the CUDA and HIP builds, only the launch differs.
#include "simt/merge_emulated.hpp"

#include "cuda_hip/merge_attn_states_kernel.hpp"

namespace mla::simt {

void merge_attn_states_emulated(const MergeArgs& args) {
  emulated::merge_kernel::merge_attn_states_with(args, [](auto kernel, const emulated::merge_kernel::MergeLaunch& how,
                                                          const emulated::merge_kernel::MergeKernelParams& params) {
    LaunchConfig config;
    config.kernel = how.name;
    config.grid.x = how.blocks;
    config.block.x = how.threads;
    launch(config, [&] { kernel(params); });
  });
}

}  // namespace mla::simt
