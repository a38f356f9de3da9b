#include "simt/emulated_backends.hpp"

#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "cuda/kernel_choice.hpp"
#include "cuda_hip/flash_dims.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "hip/capability.hpp"
#include "hip/kernel_choice.hpp"
#include "mla/backend/latents.hpp"
#include "simt/cuda_flash_emulated.hpp"
#include "simt/latents_emulated.hpp"
#include "simt/merge_emulated.hpp"
#include "simt/projection_emulated.hpp"

namespace mla::simt {
namespace {

// The vendors' own choosers, asked about the kernel alone: the emulated
// device is the host, whose queue and memory the kernels run on.
gpu::KernelChoice cuda_choice(const gpu::KernelRequest& request) {
  return cuda_flash::choose_kernel({request.dtype, request.dims, nullptr});
}

// HIP_FLASH's rows are those of the emulated target's generation.
template <AmdTarget Target>
gpu::KernelChoice hip_choice(const gpu::KernelRequest& request) {
  gpu::KernelChoice choice = hip_flash::choose_family_kernel({request.dtype, request.dims, nullptr},
                                                             hip_flash::tile_family(amd_target_name(Target)));
  if (choice.supported() && request.dtype == DType::float8_e4m3 && !hip_flash::is_e4m3_arch(amd_target_name(Target))) {
    choice.refusal = "fp8 inputs need CDNA3's fp8 MFMA (gfx940, gfx941, gfx942); the emulated target is " +
                     std::string(amd_target_name(Target));
  }
  if (choice.supported() && !hip_flash_emulated_built()) {
    choice.refusal = "has no emulated kernel: the build found no clang 15 or newer to compile the HIP kernel";
  }
  return choice;
}

// A split launch (params.num_splits > 1) is followed by the merge of its
// partials, as the vendors' dispatch does it.
void cuda_launch(Queue&, const gpu::FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  launch_cuda_flash_emulated(params, dtype, kernel.head_dim_qk, kernel.head_dim_v);
  if (params.num_splits > 1) merge_splits_emulated(params, dtype, kernel.head_dim_v);
}

template <AmdTarget Target>
void hip_launch(Queue&, const gpu::FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  launch_hip_flash_emulated(params, dtype, kernel.head_dim_qk, kernel.head_dim_v, Target);
  if (params.num_splits > 1) merge_splits_emulated(params, dtype, kernel.head_dim_v);
}

void merge(Queue&, const MergeArgs& args) { merge_attn_states_emulated(args); }

void gather(Queue&, const LatentGather& gather, const TensorView& latents, const TensorView& k) {
  gather_latents_emulated(gather, latents, k);
}

// CUDA_FLASH's own: tensor cores for bf16 and fp16.
void cuda_project(Queue&, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                  const TensorView& v) {
  project_latents_mma_emulated(latents, kv_b_proj, k, v);
}

// HIP_FLASH's own: MFMA for bf16 and fp16, on the vendor's target.
template <AmdTarget Target>
void hip_project(Queue&, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                 const TensorView& v) {
  if (k.dtype == DType::float32) return project_latents_emulated(latents, kv_b_proj, k, v);
  project_latents_hip_emulated(latents, kv_b_proj, k, v, Target);
}

// The emulated device is the host: its queue is the host queue, its memory host memory.
constexpr gpu::FlashVendor cuda_vendor{
    "CUDA_FLASH (emulated)",
    DeviceBackend::host,
    cuda_choice,
    cuda_launch,
    merge,
    gather,
    cuda_project,
    nullptr,
    true,
    quantise_e4m3_emulated,
    true,
};
template <AmdTarget Target>
constexpr gpu::FlashVendor hip_vendor(const char* name) {
  return {name,
          DeviceBackend::host,
          hip_choice<Target>,
          hip_launch<Target>,
          merge,
          gather,
          hip_project<Target>,
          nullptr,
          true,
          quantise_e4m3_emulated,
          true};
}
constexpr gpu::FlashVendor hip_gfx90a_vendor = hip_vendor<AmdTarget::gfx90a>("HIP_FLASH (emulated gfx90a)");
constexpr gpu::FlashVendor hip_gfx908_vendor = hip_vendor<AmdTarget::gfx908>("HIP_FLASH (emulated gfx908)");
constexpr gpu::FlashVendor hip_gfx942_vendor = hip_vendor<AmdTarget::gfx942>("HIP_FLASH (emulated gfx942)");

// `e4m3_inputs`: the vendor's kernel takes float8_e4m3 inputs (CUDA_FLASH's,
// the emulated device standing for an sm_89 part; HIP_FLASH's on gfx942).
BackendEntry entry_for(const gpu::FlashVendor& vendor, Availability availability, bool e4m3_inputs = false) {
  BackendDescription description;
  description.name = vendor.backend_name;
  if (e4m3_inputs) {
    description.dtypes.assign(std::begin(gpu::flash_e4m3_dtypes), std::end(gpu::flash_e4m3_dtypes));
  } else {
    description.dtypes.assign(std::begin(gpu::flash_dtypes), std::end(gpu::flash_dtypes));
  }
  description.dims.assign(std::begin(gpu::flash_dims), std::end(gpu::flash_dims));
  description.fp8_output = true;
  description.queue_kinds = {vendor.queue_backend};
  description.availability = [availability] { return availability; };
  description.kernel_refusal = [&vendor](const SelectorConfig& request, const DeviceCapability& device) {
    return vendor.choose({request.dtype, request.dims, &device}).refusal;
  };
  BackendFactory factory = [&vendor](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return std::make_unique<gpu::GpuFlashBackend>(params, vendor);
  };
  return {std::move(description), std::move(factory)};
}

}  // namespace

BackendEntry emulated_cuda_flash_entry() { return entry_for(cuda_vendor, Availability{}, true); }

BackendEntry emulated_hip_flash_entry(AmdTarget target) {
  const Availability availability =
      hip_flash_emulated_built()
          ? Availability{}
          : Availability{false, "the build found no clang 15 or newer to compile the HIP kernel"};
  switch (target) {
    case AmdTarget::gfx908:
      return entry_for(hip_gfx908_vendor, availability);
    case AmdTarget::gfx942:
      return entry_for(hip_gfx942_vendor, availability, true);
    case AmdTarget::gfx90a:
      break;
  }
  return entry_for(hip_gfx90a_vendor, availability);
}

}  // namespace mla::simt
