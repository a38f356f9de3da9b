// The <<<>>> launch of the HIP_FLASH kernel from its recipe
// (flash_launch_recipe.hpp) with its launch error, then the compiled
// instantiations, declared for the dispatch (flash_dispatch.hip): four per
// (qk, v) pair of cuda_hip/flash_shapes.def (bf16 and fp16, for each tile
// family). Causality is a runtime flag: it only moves loop bounds and the
// mask test, and keeping it out of the template halves the kernels every gfx
// target compiles. (Each target compiles only its own family's rows; the
// others are traps, see mfma.hpp.) CMake generates one flash_dqk<QK>_dv<V>.hip
// per pair that defines MLA_FLASH_QK and MLA_FLASH_V and includes this
// header, which then defines that pair's instantiations (the last block), so
// a parallel build compiles the pairs side by side. HIP only: the emulator
// (tests/support/simt) starts the blocks of the same recipe itself.
#pragma once

// The vendor runtime first: mla/detail/numeric.hpp, which the kernel's
// headers include, uses its bit casts.
#include "cuda_hip/gpu_runtime.hpp"
#include "flash_config.hpp"
#include "flash_kernel.hpp"
#include "flash_launch_recipe.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash {

using gpu::FlashParams;

// E4m3: float8_e4m3 inputs (CDNA3 only), D the output dtype. Masked: the
// launch has docs/contract.md §12's key mask or sinks.
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family, bool E4m3 = false, bool Masked = false>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  const FlashLaunch launch = plan_flash_launch<D, HeadDimQk, HeadDimV, Family, E4m3>(params);
  if (launch.empty()) return;
  const dim3 grid(launch.grid[0], launch.grid[1], launch.grid[2]);
  flash_forward_kernel<D, HeadDimQk, HeadDimV, Family, E4m3, Masked><<<grid, launch.threads, 0, stream>>>(params);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

// The compiled instantiations, declared for the dispatch: per (dtype,
// family, e4m3 inputs) one without and one with masks.
#define MLA_HIP_FLASH_DECLARE_ONE(D, QK, V, F, E)                                                    \
  extern template void launch_flash_forward<D, QK, V, F, E, false>(const FlashParams&, gpu::Stream); \
  extern template void launch_flash_forward<D, QK, V, F, E, true>(const FlashParams&, gpu::Stream);
#define MLA_HIP_FLASH_DECLARE(QK, V)                                           \
  MLA_HIP_FLASH_DECLARE_ONE(DType::bfloat16, QK, V, TileFamily::cdna12, false) \
  MLA_HIP_FLASH_DECLARE_ONE(DType::float16, QK, V, TileFamily::cdna12, false)  \
  MLA_HIP_FLASH_DECLARE_ONE(DType::bfloat16, QK, V, TileFamily::cdna3, false)  \
  MLA_HIP_FLASH_DECLARE_ONE(DType::float16, QK, V, TileFamily::cdna3, false)   \
  MLA_HIP_FLASH_DECLARE_ONE(DType::bfloat16, QK, V, TileFamily::cdna3, true)   \
  MLA_HIP_FLASH_DECLARE_ONE(DType::float16, QK, V, TileFamily::cdna3, true)
#define MLA_FLASH_SHAPE(nope, rope, v) MLA_HIP_FLASH_DECLARE((nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_HIP_FLASH_DECLARE
#undef MLA_HIP_FLASH_DECLARE_ONE

// The explicit instantiations of the pair a generated flash_dqk<QK>_dv<V>.hip
// names (cmake/MlaFlashShapes.cmake).
#if defined(MLA_FLASH_QK) && defined(MLA_FLASH_V)
#define MLA_HIP_FLASH_INSTANTIATE(D, F, E)                                                                        \
  template void launch_flash_forward<D, MLA_FLASH_QK, MLA_FLASH_V, F, E, false>(const FlashParams&, gpu::Stream); \
  template void launch_flash_forward<D, MLA_FLASH_QK, MLA_FLASH_V, F, E, true>(const FlashParams&, gpu::Stream);
MLA_HIP_FLASH_INSTANTIATE(DType::bfloat16, TileFamily::cdna12, false)
MLA_HIP_FLASH_INSTANTIATE(DType::float16, TileFamily::cdna12, false)
MLA_HIP_FLASH_INSTANTIATE(DType::bfloat16, TileFamily::cdna3, false)
MLA_HIP_FLASH_INSTANTIATE(DType::float16, TileFamily::cdna3, false)
MLA_HIP_FLASH_INSTANTIATE(DType::bfloat16, TileFamily::cdna3, true)
MLA_HIP_FLASH_INSTANTIATE(DType::float16, TileFamily::cdna3, true)
#undef MLA_HIP_FLASH_INSTANTIATE
#endif

}  // namespace mla::hip_flash
