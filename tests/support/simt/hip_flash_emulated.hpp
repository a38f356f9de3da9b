// The HIP_FLASH kernel source run by the emulator. Its instantiations are
// compiled by clang (the kernel uses ext_vector_type), in hip_flash_emulated.cpp;
// without a clang the build compiles hip_flash_unavailable.cpp instead.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "mla/tensor.hpp"

namespace mla::simt {

// Which AMD target the emulated kernel is run as: its MFMA forms (gfx90a and
// gfx942 have the 4-wide bf16 product, v_mfma_f32_32x32x8bf16_1k; gfx908 two
// 2-wide ones) and its row of the tile table (gfx942: CDNA3's).
enum class AmdTarget { gfx90a, gfx908, gfx942 };

// "gfx90a", "gfx908" or "gfx942".
inline const char* amd_target_name(AmdTarget target) {
  switch (target) {
    case AmdTarget::gfx908:
      return "gfx908";
    case AmdTarget::gfx942:
      return "gfx942";
    case AmdTarget::gfx90a:
      break;
  }
  return "gfx90a";
}

// Whether this build compiled the emulated HIP_FLASH kernels.
bool hip_flash_emulated_built();

// Runs hip_flash::flash_forward_kernel<dtype, qk, v, family> over the grid the
// real launcher uses (num_work x num_heads workgroups of the tile's threads,
// wave64) under the emulator, with the tile family of `target`. Raises Error(not_supported) for dims without a tile and
// Error(device) for a hazard.
void launch_hip_flash_emulated(const gpu::FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v,
                               AmdTarget target = AmdTarget::gfx90a);

// Runs HIP_FLASH's MFMA up-projection (hip/projection_kernel.hpp) over the
// grid its launch uses, for bf16 or fp16 k and v; the arguments must have
// passed check_latent_projection. Raises Error(not_supported) when the
// kernels were not built and Error(device) for a hazard.
void project_latents_hip_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                  const TensorView& v, AmdTarget target = AmdTarget::gfx90a);

}  // namespace mla::simt
