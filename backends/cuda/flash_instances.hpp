// The compiled CUDA_FLASH instantiations, declared for the dispatcher: four
// per (qk, v) pair of cuda_hip/flash_shapes.def (bf16 / fp16 x causal /
// non-causal), defined by flash_instantiate.cuh in the flash_dqk*_dv*.cu files
// CMake generates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"

namespace mla::cuda_flash {

using gpu::FlashParams;

// Launches flash_forward_kernel<T, HeadDimQk, HeadDimV, Causal>. Defined in flash_kernel_launch.cuh.
template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream);

#define MLA_CUDA_FLASH_DECLARE(T, QK, V)                                                      \
  extern template void launch_flash_forward<T, QK, V, true>(const FlashParams&, gpu::Stream); \
  extern template void launch_flash_forward<T, QK, V, false>(const FlashParams&, gpu::Stream);
#define MLA_FLASH_SHAPE(nope, rope, v)                        \
  MLA_CUDA_FLASH_DECLARE(__nv_bfloat16, (nope) + (rope), (v)) \
  MLA_CUDA_FLASH_DECLARE(__half, (nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_CUDA_FLASH_DECLARE

}  // namespace mla::cuda_flash
