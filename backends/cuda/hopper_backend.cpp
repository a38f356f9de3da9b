#include "hopper_backend.hpp"

#include <optional>

#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "hopper_capability.hpp"
#include "hopper_config.hpp"
#include "hopper_launch.hpp"
#include "projection.hpp"

namespace mla::hopper_flash {
namespace {

std::optional<gpu::KernelTile> find_tile(DType dtype, int head_dim_qk, int head_dim_v) {
  const HopperTileConfig* tile = find_hopper_tile_config(head_dim_qk, head_dim_v);
  if (tile == nullptr || !has_hopper_kernel(dtype, head_dim_qk, head_dim_v)) return std::nullopt;
  return gpu::KernelTile{tile->head_dim_qk, tile->head_dim_v, block_rows, tile->block_cols};
}

constexpr gpu::FlashVendor hopper_vendor{
    "HOPPER_FLASH",       queue_kind,
    device_gap,           find_tile,
    launch_hopper_flash,  cuda::merge_attn_states,
    cuda::gather_latents, cuda_flash::project_latents,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_hopper_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, hopper_vendor);
}

}  // namespace mla::hopper_flash
