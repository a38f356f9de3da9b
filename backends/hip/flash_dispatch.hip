// Runtime (dtype, head dims) -> compiled instantiation: one branch per shape
// of cuda_hip/flash_shapes.def.
#include <string>

#include "cuda_hip/flash_dims.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "flash_config.hpp"
#include "flash_instances.hpp"
#include "flash_launch.hpp"
#include "mla/error.hpp"

namespace mla::hip_flash {
namespace {

template <DType D>
void launch_for_dims(const FlashParams& params, int head_dim_qk, int head_dim_v, gpu::Stream stream) {
#define MLA_FLASH_SHAPE(nope, rope, v)                     \
  if (head_dim_qk == (nope) + (rope) && head_dim_v == (v)) \
    return launch_flash_forward<D, (nope) + (rope), (v)>(params, stream);
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
  raise(ErrorCategory::internal, "HIP_FLASH: head dims " + std::to_string(head_dim_qk) + "/" +
                                     std::to_string(head_dim_v) + " have a tile configuration but no kernel");
}

}  // namespace

bool has_flash_kernel(DType dtype, int head_dim_qk, int head_dim_v) {
  return gpu::is_flash_dtype(dtype) && find_flash_tile_config(head_dim_qk, head_dim_v) != nullptr;
}

void launch_flash_attention(Queue& queue, const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v) {
  if (queue.backend() != DeviceBackend::hip) {
    raise(ErrorCategory::not_supported, "HIP_FLASH needs a HIP queue; got the " + queue.describe());
  }
  if (!has_flash_kernel(dtype, head_dim_qk, head_dim_v)) {
    raise(ErrorCategory::not_supported, "HIP_FLASH has no kernel for " + std::string(dtype_name(dtype)) +
                                            " with qk head dim " + std::to_string(head_dim_qk) + " and v head dim " +
                                            std::to_string(head_dim_v));
  }
  // The kernels are written for 64-lane waves; a wave32 device (RDNA) must
  // never get here, whatever the selector was told.
  const DeviceCapability& device = queue.capability();
  if (device.warp_size != mfma::wave_size) {
    raise(ErrorCategory::not_supported, "HIP_FLASH needs a wave64 device with MFMA; " + device.describe() +
                                            " runs waves of " + std::to_string(device.warp_size));
  }
  gpu::DeviceGuard guard(queue.device_index());
  const gpu::Stream stream = gpu::stream_of(queue);
  if (dtype == DType::bfloat16) {
    launch_for_dims<DType::bfloat16>(params, head_dim_qk, head_dim_v, stream);
  } else {
    launch_for_dims<DType::float16>(params, head_dim_qk, head_dim_v, stream);
  }
}

}  // namespace mla::hip_flash
