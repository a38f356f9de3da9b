// Runtime (dtype, head dims, the device's tile family) -> compiled
// instantiation: one branch per shape of cuda_hip/flash_shapes.def.
#include <string>

// The HIP runtime first: it defines __host__ and __device__, which the shared
// headers below use when hipcc compiles them.
#include "cuda_hip/gpu_runtime.hpp"

#include "cuda_hip/flash_launch.hpp"
#include "cuda_hip/split_merge_kernel.hpp"
#include "flash_kernel_launch.hpp"
#include "hip/capability.hpp"
#include "mla/error.hpp"

namespace mla::hip_flash {
namespace {

// E4m3: float8_e4m3 inputs, D the output dtype (CDNA3 only). A launch with
// docs/contract.md §12's key mask or sinks runs the instantiations that read them.
template <DType D, TileFamily Family, bool E4m3 = false>
void launch_for_dims(const FlashParams& params, int head_dim_qk, int head_dim_v, gpu::Stream stream) {
  const bool masked = params.mask.masks_keys() || params.mask.sinks != nullptr;
#define MLA_FLASH_SHAPE(nope, rope, v)                                                                    \
  if (head_dim_qk == (nope) + (rope) && head_dim_v == (v)) {                                              \
    if (masked) return launch_flash_forward<D, (nope) + (rope), (v), Family, E4m3, true>(params, stream); \
    return launch_flash_forward<D, (nope) + (rope), (v), Family, E4m3, false>(params, stream);            \
  }
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
  raise(ErrorCategory::internal, "HIP_FLASH: head dims " + std::to_string(head_dim_qk) + "/" +
                                     std::to_string(head_dim_v) + " have a tile configuration but no kernel");
}

}  // namespace
}  // namespace mla::hip_flash

namespace mla::hip {

void launch_flash_attention(Queue& queue, const gpu::FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  gpu::DeviceGuard guard(queue.device_index());
  const gpu::Stream stream = gpu::stream_of(queue);
  using hip_flash::TileFamily;
  const bool cdna3 = hip_flash::tile_family(queue.capability().arch) == TileFamily::cdna3;
  // The chooser let e4m3 inputs through on gfx940-942 only (CDNA3).
  const auto launch =
      params.e4m3_inputs
          ? (dtype == DType::bfloat16 ? hip_flash::launch_for_dims<DType::bfloat16, TileFamily::cdna3, true>
                                      : hip_flash::launch_for_dims<DType::float16, TileFamily::cdna3, true>)
      : cdna3 ? (dtype == DType::bfloat16 ? hip_flash::launch_for_dims<DType::bfloat16, TileFamily::cdna3>
                                          : hip_flash::launch_for_dims<DType::float16, TileFamily::cdna3>)
              : (dtype == DType::bfloat16 ? hip_flash::launch_for_dims<DType::bfloat16, TileFamily::cdna12>
                                          : hip_flash::launch_for_dims<DType::float16, TileFamily::cdna12>);
  launch(params, kernel.head_dim_qk, kernel.head_dim_v, stream);
  if (params.num_splits > 1) {
    split_merge::merge_splits_with(
        params, dtype, kernel.head_dim_v,
        [stream](auto merge, const merge_kernel::MergeLaunch& how, const gpu::FlashParams& p, std::int64_t dim) {
          merge<<<how.blocks, how.threads, 0, stream>>>(p, dim);
          gpu::check_launch(how.name, how.context);
        });
  }
}

}  // namespace mla::hip
