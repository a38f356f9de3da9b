// The CUDA / HIP launches of the MLA step's gather and up-projection kernels
// (latent_kernels.hpp).
#include "gpu_runtime.hpp"
#include "latent_kernels.hpp"
#include "latents.hpp"
#include "mla/backend/latents.hpp"

namespace mla::MLA_GPU_NAMESPACE {
namespace {

// Launches one kernel of latent_kernels.hpp on the queue's stream.
template <class Params>
struct StreamLaunch {
  Queue& queue;
  template <class Kernel>
  void operator()(Kernel kernel, const latent_kernel::LatentLaunch& how, const Params& params) const {
    gpu::DeviceGuard guard(queue.device_index());
    kernel<<<dim3(how.grid_x, how.grid_y), dim3(how.block_x, how.block_y), 0, gpu::stream_of(queue)>>>(params);
    gpu::check_launch(how.name, how.context);
  }
};

}  // namespace

void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k) {
  latent_kernel::gather_latents_with(gather, latents, k, StreamLaunch<latent_kernel::GatherParams>{queue});
}

void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v) {
  latent_kernel::project_latents_with(latents, kv_b_proj, k, v, StreamLaunch<latent_kernel::ProjectParams>{queue});
}

void quantise_e4m3(Queue& queue, const TensorView& from, const TensorView& to, std::optional<float> scale,
                   float* scratch) {
  const auto zero = [&queue](void* words, std::size_t bytes) { queue.memset(words, 0, bytes); };
  latent_kernel::quantise_e4m3_with(from, to, scale, scratch, zero, StreamLaunch<latent_kernel::QuantiseParams>{queue});
}

}  // namespace mla::MLA_GPU_NAMESPACE
