// The compiled HIP_FLASH instantiations, declared for the dispatcher: two per
// (qk, v) pair of cuda_hip/flash_shapes.def (bf16 and fp16), defined by
// flash_instantiate.hpp in the flash_dqk*_dv*.hip files CMake generates. Causality is a
// runtime flag: it only moves loop bounds and the mask test, and keeping it
// out of the template halves the kernels every gfx target compiles.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash {

using gpu::FlashParams;

// Launches flash_forward_kernel<D, HeadDimQk, HeadDimV>. Defined in flash_kernel_launch.hpp.
template <DType D, int HeadDimQk, int HeadDimV>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream);

#define MLA_HIP_FLASH_DECLARE(QK, V)                                                                  \
  extern template void launch_flash_forward<DType::bfloat16, QK, V>(const FlashParams&, gpu::Stream); \
  extern template void launch_flash_forward<DType::float16, QK, V>(const FlashParams&, gpu::Stream);
#define MLA_FLASH_SHAPE(nope, rope, v) MLA_HIP_FLASH_DECLARE((nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_HIP_FLASH_DECLARE

}  // namespace mla::hip_flash
