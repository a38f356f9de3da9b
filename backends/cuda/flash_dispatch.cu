// Runtime (dtype, head dims, causal) -> compiled instantiation: one branch per
// shape of cuda_hip/flash_shapes.def.
#include <algorithm>
#include <string>

#include "cuda/flash_launch_recipe.hpp"
#include "cuda_hip/flash_launch.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "cuda_hip/split_merge_kernel.hpp"
#include "flash_launch.cuh"
#include "mla/error.hpp"

namespace mla::cuda_flash {
namespace {

template <class T, int HeadDimQk, int HeadDimV>
void launch_causal_or_not(const FlashParams& params, bool causal, gpu::Stream stream) {
  if (params.e4m3_inputs) {
    if (causal) return launch_flash_forward<T, HeadDimQk, HeadDimV, true, __nv_fp8_e4m3>(params, stream);
    return launch_flash_forward<T, HeadDimQk, HeadDimV, false, __nv_fp8_e4m3>(params, stream);
  }
  if (causal) {
    launch_flash_forward<T, HeadDimQk, HeadDimV, true>(params, stream);
  } else {
    launch_flash_forward<T, HeadDimQk, HeadDimV, false>(params, stream);
  }
}

// T: the output type (and the inputs', unless params.e4m3_inputs).
template <class T>
void launch_for_dims(const FlashParams& params, int head_dim_qk, int head_dim_v, bool causal, gpu::Stream stream) {
#define MLA_FLASH_SHAPE(nope, rope, v)                     \
  if (head_dim_qk == (nope) + (rope) && head_dim_v == (v)) \
    return launch_causal_or_not<T, (nope) + (rope), (v)>(params, causal, stream);
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
  raise(ErrorCategory::internal, "CUDA_FLASH: head dims " + std::to_string(head_dim_qk) + "/" +
                                     std::to_string(head_dim_v) + " have a tile configuration but no kernel");
}

}  // namespace
}  // namespace mla::cuda_flash

namespace mla::cuda {

void launch_flash_attention(Queue& queue, const gpu::FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  gpu::DeviceGuard guard(queue.device_index());
  const gpu::Stream stream = gpu::stream_of(queue);
  int l2_bytes = 0;
  gpu::check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, queue.device_index()), "DeviceGetAttribute",
             "the L2 size of device " + std::to_string(queue.device_index()));
  gpu::FlashParams grouped = params;
  grouped.head_group = cuda_flash::flash_head_group(params, static_cast<std::size_t>(std::max(l2_bytes, 0)),
                                                    kernel.head_dim_qk, kernel.head_dim_v);
  if (dtype == DType::bfloat16) {
    cuda_flash::launch_for_dims<__nv_bfloat16>(grouped, kernel.head_dim_qk, kernel.head_dim_v, grouped.causal, stream);
  } else {
    cuda_flash::launch_for_dims<__half>(grouped, kernel.head_dim_qk, kernel.head_dim_v, grouped.causal, stream);
  }
  if (params.num_splits > 1) {
    split_merge::merge_splits_with(
        params, dtype, kernel.head_dim_v,
        [stream](auto merge, const merge_kernel::MergeLaunch& how, const gpu::FlashParams& p, std::int64_t dim) {
          merge<<<how.blocks, how.threads, 0, stream>>>(p, dim);
          gpu::check_launch(how.name, how.context);
        });
  }
}

}  // namespace mla::cuda
