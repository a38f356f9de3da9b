#include "cuda_flash_backend.hpp"

#include <optional>
#include <string>

#include "capability.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "flash_config.hpp"
#include "flash_launch.hpp"
#include "projection.hpp"

namespace mla::cuda_flash {
namespace {

std::optional<gpu::KernelTile> find_tile(DType dtype, int head_dim_qk, int head_dim_v) {
  const FlashTileConfig* tile = find_flash_tile_config(head_dim_qk, head_dim_v);
  if (tile == nullptr || !has_flash_kernel(dtype, head_dim_qk, head_dim_v)) return std::nullopt;
  return gpu::KernelTile{tile->head_dim_qk, tile->head_dim_v, tile->block_rows, tile->block_cols};
}

constexpr gpu::FlashVendor cuda_vendor{
    "CUDA_FLASH",
    queue_kind,
    device_gap,
    find_tile,
    launch_flash_attention,
    cuda::merge_attn_states,
    cuda::gather_latents,
    cuda_flash::project_latents,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_cuda_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, cuda_vendor);
}

}  // namespace mla::cuda_flash
