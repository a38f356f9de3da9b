#include "hip_flash_backend.hpp"

#include "capability.hpp"
#include "cuda_hip/flash_launch.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "kernel_choice.hpp"
#include "projection.hpp"

namespace mla::hip_flash {
namespace {

constexpr gpu::FlashVendor hip_vendor{
    "HIP_FLASH",
    queue_kind,
    choose_kernel,
    hip::launch_flash_attention,
    hip::merge_attn_states,
    hip::gather_latents,
    project_latents,
    nullptr,
    true,
    hip::quantise_e4m3,
    true,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_hip_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, hip_vendor);
}

}  // namespace mla::hip_flash
