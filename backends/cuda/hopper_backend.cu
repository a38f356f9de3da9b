// HOPPER_FLASH's backend: its kernel chooser, launch and dispatch
// (hopper_launch.cuh) in the GPU backend class CUDA_FLASH and HIP_FLASH share,
// with CUDA_FLASH's merge, gather and up-projection kernels.
#include "hopper_backend.hpp"

#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "hopper_config.hpp"
#include "hopper_launch.cuh"
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
