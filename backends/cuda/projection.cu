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

// Adds, over a [n, heads, rows] view of 2-byte values, a mix of each value's
// bits with its position: equal sums mean equal views but for a collision.
// Integer adds, so the order the blocks run in does not matter.
__global__ void fingerprint_kernel(const std::uint16_t* data, std::int64_t n, std::int64_t heads, std::int64_t rows,
                                   std::int64_t stride0, std::int64_t stride1, std::int64_t stride2,
                                   unsigned long long* sum) {
  const std::int64_t count = n * heads * rows;
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i % rows, h = i / rows % heads, t = i / rows / heads;
    unsigned long long x = (static_cast<unsigned long long>(i) << 16) | data[t * stride0 + h * stride1 + r * stride2];
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    local += x ^ (x >> 31);
  }
  atomicAdd(sum, local);
}

}  // namespace

void fingerprint(Queue& queue, const TensorView& view, std::uint64_t* sum) {
  const std::string context = "fingerprint of " + view.describe();
  if (dtype_size(view.dtype) != 2 || view.rank != 3) {
    raise(ErrorCategory::internal, "fingerprint: a 3-d view of 2-byte values only, got " + view.describe());
  }
  gpu::DeviceGuard guard(queue.device_index(), context);
  const cudaStream_t stream = gpu::stream_of(queue);
  gpu::check(cudaMemsetAsync(sum, 0, sizeof *sum, stream), "MemsetAsync", context);
  fingerprint_kernel<<<264, 256, 0, stream>>>(static_cast<const std::uint16_t*>(view.data), view.size(0), view.size(1),
                                              view.size(2), view.stride[0], view.stride[1], view.stride[2],
                                              reinterpret_cast<unsigned long long*>(sum));
  gpu::check_launch("fingerprint_kernel", context);
}

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
