// The <<<>>> launch of HIP_FLASH's MFMA up-projection (projection_kernel.hpp).
// The HIP runtime first: it defines __host__ and __device__, which the shared
// headers use when hipcc compiles them.
#include "cuda_hip/gpu_runtime.hpp"

#include "cuda_hip/latents.hpp"
#include "projection.hpp"
#include "projection_kernel.hpp"

namespace mla::hip_flash {

void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v) {
  if (k.dtype == DType::float32) return hip::project_latents(queue, latents, kv_b_proj, k, v);
  projection::project_mfma_with(
      latents, kv_b_proj, k, v,
      [&](auto kernel, const hip::latent_kernel::LatentLaunch& how, const projection::ProjectParams& params) {
        gpu::DeviceGuard guard(queue.device_index());
        kernel<<<dim3(how.grid_x, how.grid_y), dim3(how.block_x, how.block_y), 0, gpu::stream_of(queue)>>>(params);
        gpu::check_launch(how.name, how.context);
      });
}

}  // namespace mla::hip_flash
