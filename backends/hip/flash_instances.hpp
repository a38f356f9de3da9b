// The compiled HIP_FLASH instantiations, declared for the dispatcher: four per
// (qk, v) pair of cuda_hip/flash_shapes.def (bf16 and fp16, for each tile
// family), defined by flash_instantiate.hpp in the flash_dqk*_dv*.hip files
// CMake generates. Causality is a runtime flag: it only moves loop bounds and
// the mask test, and keeping it out of the template halves the kernels every
// gfx target compiles. (Each target compiles only its own family's rows; the
// others are traps, see mfma.hpp.)
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "flash_config.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash {

using gpu::FlashParams;

// Launches flash_forward_kernel<D, HeadDimQk, HeadDimV, Family>. Defined in flash_kernel_launch.hpp.
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream);

#define MLA_HIP_FLASH_DECLARE_FAMILY(QK, V, F)                                                           \
  extern template void launch_flash_forward<DType::bfloat16, QK, V, F>(const FlashParams&, gpu::Stream); \
  extern template void launch_flash_forward<DType::float16, QK, V, F>(const FlashParams&, gpu::Stream);
#define MLA_HIP_FLASH_DECLARE(QK, V)                      \
  MLA_HIP_FLASH_DECLARE_FAMILY(QK, V, TileFamily::cdna12) \
  MLA_HIP_FLASH_DECLARE_FAMILY(QK, V, TileFamily::cdna3)
#define MLA_FLASH_SHAPE(nope, rope, v) MLA_HIP_FLASH_DECLARE((nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_HIP_FLASH_DECLARE
#undef MLA_HIP_FLASH_DECLARE_FAMILY

}  // namespace mla::hip_flash
