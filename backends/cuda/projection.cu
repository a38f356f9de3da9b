// The <<<>>> launch of the tensor-core projection (projection_kernel.cuh).
#include "cuda_hip/gpu_runtime.hpp"
#include "cuda_hip/latents.hpp"
#include "projection.hpp"
#include "projection_kernel.cuh"

namespace mla::cuda_flash {

void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v) {
  // mma.sync has no fp32 operands: float32 keeps its precision on the SIMT kernel.
  if (k.dtype == DType::float32) return cuda::project_latents(queue, latents, kv_b_proj, k, v);
  projection::project_mma_with(
      latents, kv_b_proj, k, v,
      [&](auto kernel, const cuda::latent_kernel::LatentLaunch& how, const projection::ProjectParams& params) {
        gpu::DeviceGuard guard(queue.device_index());
        kernel<<<dim3(how.grid_x, how.grid_y), dim3(how.block_x, how.block_y), 0, gpu::stream_of(queue)>>>(params);
        gpu::check_launch(how.name, how.context);
      });
}

}  // namespace mla::cuda_flash
