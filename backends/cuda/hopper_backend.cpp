#include "hopper_backend.hpp"

#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "hopper_capability.hpp"
#include "hopper_kernel_choice.hpp"
#include "hopper_launch.hpp"
#include "projection.hpp"

namespace mla::hopper_flash {
namespace {

constexpr gpu::FlashVendor hopper_vendor{
    "HOPPER_FLASH",
    queue_kind,
    choose_kernel,
    launch_hopper_flash,
    cuda::merge_attn_states,
    cuda::gather_latents,
    cuda_flash::project_latents,
    cuda_flash::make_projector,
    true,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_hopper_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, hopper_vendor);
}

}  // namespace mla::hopper_flash
