// The explicit instantiations of one (qk head dim, v head dim) pair: bf16 and
// fp16, for each tile family. CMake generates one flash_dqk<QK>_dv<V>.hip per pair of
// cuda_hip/flash_shapes.def that defines MLA_FLASH_QK and MLA_FLASH_V and
// includes this, so a parallel build compiles the pairs side by side.
#pragma once

#if !defined(MLA_FLASH_QK) || !defined(MLA_FLASH_V)
#error "define MLA_FLASH_QK and MLA_FLASH_V before including flash_instantiate.hpp"
#endif

#include "flash_kernel_launch.hpp"

namespace mla::hip_flash {

#define MLA_HIP_FLASH_INSTANTIATE(F)                                                                                  \
  template void launch_flash_forward<DType::bfloat16, MLA_FLASH_QK, MLA_FLASH_V, F>(const FlashParams&, gpu::Stream); \
  template void launch_flash_forward<DType::float16, MLA_FLASH_QK, MLA_FLASH_V, F>(const FlashParams&, gpu::Stream);
MLA_HIP_FLASH_INSTANTIATE(TileFamily::cdna12)
MLA_HIP_FLASH_INSTANTIATE(TileFamily::cdna3)
#undef MLA_HIP_FLASH_INSTANTIATE

}  // namespace mla::hip_flash
