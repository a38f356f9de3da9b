// Runtime (dtype, head dims, causal) -> compiled instantiation: one branch per
// shape of cuda_hip/flash_shapes.def.
#include <string>

#include "cuda_hip/flash_dims.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "flash_config.hpp"
#include "flash_instances.hpp"
#include "flash_launch.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash {
namespace {

template <class T, int HeadDimQk, int HeadDimV>
void launch_causal_or_not(const FlashParams& params, bool causal, gpu::Stream stream, std::size_t shared_limit) {
  if (causal) {
    launch_flash_forward<T, HeadDimQk, HeadDimV, true>(params, stream, shared_limit);
  } else {
    launch_flash_forward<T, HeadDimQk, HeadDimV, false>(params, stream, shared_limit);
  }
}

template <class T>
void launch_for_dims(const FlashParams& params, int head_dim_qk, int head_dim_v, bool causal, gpu::Stream stream,
                     std::size_t shared_limit) {
#define MLA_FLASH_SHAPE(nope, rope, v)                     \
  if (head_dim_qk == (nope) + (rope) && head_dim_v == (v)) \
    return launch_causal_or_not<T, (nope) + (rope), (v)>(params, causal, stream, shared_limit);
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
  raise(ErrorCategory::internal, "CUDA_FLASH: head dims " + std::to_string(head_dim_qk) + "/" +
                                     std::to_string(head_dim_v) + " have a tile configuration but no kernel");
}

}  // namespace

bool has_flash_kernel(DType dtype, int head_dim_qk, int head_dim_v) {
  return gpu::is_flash_dtype(dtype) && find_flash_tile_config(head_dim_qk, head_dim_v) != nullptr;
}

void launch_flash_attention(Queue& queue, const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v) {
  if (queue.backend() != DeviceBackend::cuda) {
    raise(ErrorCategory::not_supported, "CUDA_FLASH needs a CUDA queue; got the " + queue.describe());
  }
  if (!has_flash_kernel(dtype, head_dim_qk, head_dim_v)) {
    raise(ErrorCategory::not_supported, "CUDA_FLASH has no kernel for " + std::string(dtype_name(dtype)) +
                                            " with qk head dim " + std::to_string(head_dim_qk) + " and v head dim " +
                                            std::to_string(head_dim_v));
  }
  gpu::DeviceGuard guard(queue.device_index());
  const gpu::Stream stream = gpu::stream_of(queue);
  const std::size_t shared_limit = queue.capability().shared_memory_per_block;
  if (dtype == DType::bfloat16) {
    launch_for_dims<__nv_bfloat16>(params, head_dim_qk, head_dim_v, params.causal, stream, shared_limit);
  } else {
    launch_for_dims<__half>(params, head_dim_qk, head_dim_v, params.causal, stream, shared_limit);
  }
}

}  // namespace mla::cuda_flash
