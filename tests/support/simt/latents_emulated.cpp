// The gather and up-projection kernels of backends/cuda_hip, compiled by the
// host compiler and launched through the emulator: the same planning (dtype
// dispatch, grid) as the CUDA and HIP builds, only the launch differs.
#include "simt/latents_emulated.hpp"

#include <cstring>

#include "mla/backend/latents.hpp"
#include "simt/latent_launch.hpp"

namespace mla::simt {

void gather_latents_emulated(const LatentGather& gather, const TensorView& latents, const TensorView& k) {
  emulated::latent_kernel::gather_latents_with(gather, latents, k, EmulatedLatentLaunch{});
}

void project_latents_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                              const TensorView& v) {
  emulated::latent_kernel::project_latents_with(latents, kv_b_proj, k, v, EmulatedLatentLaunch{});
}

void quantise_e4m3_emulated(Queue&, const TensorView& from, const TensorView& to, std::optional<float> scale,
                            float* scratch) {
  const auto zero = [](void* words, std::size_t bytes) { std::memset(words, 0, bytes); };
  emulated::latent_kernel::quantise_e4m3_with(from, to, scale, scratch, zero, EmulatedLatentLaunch{});
}

}  // namespace mla::simt
