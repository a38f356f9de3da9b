#include "cuda_flash_backend.hpp"

#include "arch_coverage.hpp"
#include "capability.hpp"
#include "cuda_hip/flash_launch.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "kernel_choice.hpp"
#include "projection.hpp"

namespace mla::cuda_flash {
namespace {

// The chooser, and on a device whose loaded code predates sm_89 (an 8.9
// part running this build's sm_80 code) no fp8-input kernel: its mma would trap.
gpu::KernelChoice choose_built_kernel(const gpu::KernelRequest& request) {
  gpu::KernelChoice choice = choose_kernel(request);
  if (choice.supported() && request.device != nullptr && request.dtype == DType::float8_e4m3) {
    choice.refusal = e4m3_code_gap(MLA_CUDA_ARCHITECTURES, *request.device);
  }
  return choice;
}

constexpr gpu::FlashVendor cuda_vendor{
    "CUDA_FLASH",
    queue_kind,
    choose_built_kernel,
    cuda::launch_flash_attention,
    cuda::merge_attn_states,
    cuda::gather_latents,
    cuda_flash::project_latents,
    cuda_flash::make_projector,
    true,
    cuda::quantise_e4m3,
    true,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_cuda_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, cuda_vendor);
}

}  // namespace mla::cuda_flash
