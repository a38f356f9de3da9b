// The <<<>>> launches of the own projection kernels (projection_kernel.cuh)
// and of the latents' conversion for the cuBLASLt path.
#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_hip/gpu_runtime.hpp"
#include "cuda_hip/latents.hpp"
#include "projection.hpp"
#include "projection_kernel.cuh"

namespace mla::cuda_flash {
namespace {

__device__ inline __nv_bfloat16 round_to(float x, __nv_bfloat16*) { return __float2bfloat16_rn(x); }
__device__ inline __half round_to(float x, __half*) { return __float2half_rn(x); }

// One block per token row at a time (grid-stride over rows), threads along the row.
template <class T>
__global__ void convert_latents_kernel(const float* in, std::int64_t token_stride, std::int64_t latent_stride,
                                       std::int64_t tokens, std::int64_t width, T* out) {
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (std::int64_t l = threadIdx.x; l < width; l += blockDim.x) {
      out[t * width + l] = round_to(in[t * token_stride + l * latent_stride], static_cast<T*>(nullptr));
    }
  }
}

}  // namespace

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

void convert_latents(Queue& queue, const TensorView& latents, void* out, DType dtype) {
  const std::int64_t tokens = latents.size(0), width = latents.size(1);
  if (tokens == 0 || width == 0) return;
  constexpr int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(tokens, 65535));
  const auto* in = static_cast<const float*>(latents.data);
  const std::string context = "latents " + latents.describe();
  gpu::DeviceGuard guard(queue.device_index(), context);
  if (dtype == DType::bfloat16) {
    convert_latents_kernel<<<blocks, threads, 0, gpu::stream_of(queue)>>>(
        in, latents.stride[0], latents.stride[1], tokens, width, static_cast<__nv_bfloat16*>(out));
    gpu::check_launch("convert_latents_kernel<bfloat16>", context);
  } else if (dtype == DType::float16) {
    convert_latents_kernel<<<blocks, threads, 0, gpu::stream_of(queue)>>>(in, latents.stride[0], latents.stride[1],
                                                                          tokens, width, static_cast<__half*>(out));
    gpu::check_launch("convert_latents_kernel<float16>", context);
  } else {
    raise(ErrorCategory::internal, "convert_latents: bfloat16 or float16 only, got " + std::string(dtype_name(dtype)));
  }
}

}  // namespace mla::cuda_flash
