// The CUDA launch of the CUDA_FLASH kernel, top to bottom: the <<<>>> launch
// of one instantiation from its recipe (flash_launch_recipe.hpp: name, grid,
// threads, shared memory) with the shared-memory opt-in and the launch
// error, then the compiled instantiations (eight per (qk, v) pair of
// cuda_hip/flash_shapes.def: bf16 / fp16 output x 16-bit / e4m3 inputs x
// causal / non-causal), declared
// for the dispatch (flash_dispatch.cu). Whether the device has the shared
// memory is the kernel chooser's answer (kernel_choice.hpp), asked before the
// launch. CMake generates one flash_dqk<QK>_dv<V>.cu per pair that defines
// MLA_FLASH_QK and MLA_FLASH_V and includes this header, which then defines
// that pair's instantiations (the last block), so a parallel build compiles
// the pairs side by side. CUDA only: the emulator (tests/support/simt) starts
// the blocks of the same recipe itself.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "flash_kernel.cuh"
#include "flash_launch_recipe.hpp"

namespace mla::cuda_flash {

using gpu::FlashParams;

// Launches one instantiation: T output (and inputs, unless In is e4m3).
template <class T, int HeadDimQk, int HeadDimV, bool Causal, class In = T>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  const FlashLaunch launch =
      plan_flash_launch<HeadDimQk, HeadDimV, Causal>(params, element_dtype<T>, element_dtype<In>);
  if (launch.blocks == 0) return;
  auto* kernel = &flash_forward_kernel<T, HeadDimQk, HeadDimV, Causal, In>;
  gpu::set_max_dynamic_shared_memory(kernel, static_cast<int>(launch.shared_bytes), launch.kernel);
  kernel<<<static_cast<unsigned>(launch.blocks), launch.threads, launch.shared_bytes, stream>>>(params);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

// The compiled instantiations, declared for the dispatch.
#define MLA_CUDA_FLASH_DECLARE(T, QK, V)                                                                     \
  extern template void launch_flash_forward<T, QK, V, true, T>(const FlashParams&, gpu::Stream);             \
  extern template void launch_flash_forward<T, QK, V, false, T>(const FlashParams&, gpu::Stream);            \
  extern template void launch_flash_forward<T, QK, V, true, __nv_fp8_e4m3>(const FlashParams&, gpu::Stream); \
  extern template void launch_flash_forward<T, QK, V, false, __nv_fp8_e4m3>(const FlashParams&, gpu::Stream);
#define MLA_FLASH_SHAPE(nope, rope, v)                        \
  MLA_CUDA_FLASH_DECLARE(__nv_bfloat16, (nope) + (rope), (v)) \
  MLA_CUDA_FLASH_DECLARE(__half, (nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_CUDA_FLASH_DECLARE

// The explicit instantiations of the pair a generated flash_dqk<QK>_dv<V>.cu
// names (cmake/MlaFlashShapes.cmake).
#if defined(MLA_FLASH_QK) && defined(MLA_FLASH_V)
#define MLA_CUDA_FLASH_DEFINE(T, In)                                                                           \
  template void launch_flash_forward<T, MLA_FLASH_QK, MLA_FLASH_V, true, In>(const FlashParams&, gpu::Stream); \
  template void launch_flash_forward<T, MLA_FLASH_QK, MLA_FLASH_V, false, In>(const FlashParams&, gpu::Stream);
MLA_CUDA_FLASH_DEFINE(__nv_bfloat16, __nv_bfloat16)
MLA_CUDA_FLASH_DEFINE(__half, __half)
MLA_CUDA_FLASH_DEFINE(__nv_bfloat16, __nv_fp8_e4m3)
MLA_CUDA_FLASH_DEFINE(__half, __nv_fp8_e4m3)
#undef MLA_CUDA_FLASH_DEFINE
#endif

}  // namespace mla::cuda_flash
