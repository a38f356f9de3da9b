#include "cuda_flash_backend.hpp"

#include "capability.hpp"
#include "cuda_hip/flash_launch.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "kernel_choice.hpp"
#include "projection.hpp"

namespace mla::cuda_flash {
namespace {

constexpr gpu::FlashVendor cuda_vendor{
    "CUDA_FLASH",
    queue_kind,
    choose_kernel,
    cuda::launch_flash_attention,
    cuda::merge_attn_states,
    cuda::gather_latents,
    cuda_flash::project_latents,
    cuda_flash::make_projector,
    true,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_cuda_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, cuda_vendor);
}

}  // namespace mla::cuda_flash
