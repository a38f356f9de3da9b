// The LSE merge kernel of backends/cuda_hip, compiled by the host compiler and
// launched through the emulator: the same planning (vector width, grid) as
// the CUDA and HIP builds, only the launch differs.
#include "simt/merge_emulated.hpp"

#include "cuda_hip/merge_attn_states_kernel.hpp"
#include "cuda_hip/split_merge_kernel.hpp"

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

void merge_splits_emulated(const gpu::FlashParams& params, DType dtype, int v_head_dim) {
  emulated::split_merge::merge_splits_with(
      params, dtype, v_head_dim,
      [](auto kernel, const emulated::merge_kernel::MergeLaunch& how, const gpu::FlashParams& p, std::int64_t dim) {
        LaunchConfig config;
        config.kernel = how.name;
        config.grid.x = how.blocks;
        config.block.x = how.threads;
        launch(config, [&] { kernel(p, dim); });
      });
}

}  // namespace mla::simt
