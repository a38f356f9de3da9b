// The CUDA launch of the CUDA_FLASH kernel, top to bottom: the <<<>>> launch
// of one instantiation from its recipe (flash_launch_recipe.hpp: name, grid,
// threads, shared memory) with the shared-memory opt-in and the launch
// error, then the compiled instantiations (four per (qk, v) pair of
// cuda_hip/flash_shapes.def: bf16 / fp16 x causal / non-causal), declared
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

// Launches one instantiation.
template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  constexpr DType dtype = element_dtype<T>;
  const FlashLaunch launch = plan_flash_launch<HeadDimQk, HeadDimV, Causal>(params, dtype);
  if (launch.blocks == 0) return;
  auto* kernel = &flash_forward_kernel<T, HeadDimQk, HeadDimV, Causal>;
  gpu::set_max_dynamic_shared_memory(kernel, static_cast<int>(launch.shared_bytes), launch.kernel);
  kernel<<<static_cast<unsigned>(launch.blocks), launch.threads, launch.shared_bytes, stream>>>(params);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

// The compiled instantiations, declared for the dispatch.
#define MLA_CUDA_FLASH_DECLARE(T, QK, V)                                                      \
  extern template void launch_flash_forward<T, QK, V, true>(const FlashParams&, gpu::Stream); \
  extern template void launch_flash_forward<T, QK, V, false>(const FlashParams&, gpu::Stream);
#define MLA_FLASH_SHAPE(nope, rope, v)                        \
  MLA_CUDA_FLASH_DECLARE(__nv_bfloat16, (nope) + (rope), (v)) \
  MLA_CUDA_FLASH_DECLARE(__half, (nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_CUDA_FLASH_DECLARE

// The explicit instantiations of the pair a generated flash_dqk<QK>_dv<V>.cu
// names (cmake/MlaFlashShapes.cmake).
#if defined(MLA_FLASH_QK) && defined(MLA_FLASH_V)
template void launch_flash_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream);
template void launch_flash_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream);
template void launch_flash_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream);
template void launch_flash_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream);
#endif

}  // namespace mla::cuda_flash
