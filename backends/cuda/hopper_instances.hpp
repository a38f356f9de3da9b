// The compiled HOPPER_FLASH instantiations, declared for the dispatcher: four
// per (qk, v) pair of cuda_hip/flash_shapes.def (bf16 / fp16 x causal /
// non-causal), defined by hopper_instantiate.cuh in the hopper_dqk*_dv*.cu
// files CMake generates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"

namespace mla::hopper_flash {

using gpu::FlashParams;

// What the launcher needs of the device.
struct LaunchDevice {
  std::size_t shared_limit = 0;          // opt-in shared memory per block
  int multiprocessors = 0;               // the persistent grid's size
  std::size_t l2_bytes = 0;              // sizes the head groups; 0: unknown
  int max_head_group = 0;                // > 0: MLA_HOPPER_HEAD_GROUP's override of the L2 sizing
  cudaMemPool_t counter_pool = nullptr;  // the tile counter's; null under stream capture
};

template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void launch_hopper_forward(const FlashParams& params, gpu::Stream stream, const LaunchDevice& device);

#define MLA_HOPPER_DECLARE(T, QK, V)                                                                                \
  extern template void launch_hopper_forward<T, QK, V, true>(const FlashParams&, gpu::Stream, const LaunchDevice&); \
  extern template void launch_hopper_forward<T, QK, V, false>(const FlashParams&, gpu::Stream, const LaunchDevice&);
#define MLA_FLASH_SHAPE(nope, rope, v)                    \
  MLA_HOPPER_DECLARE(__nv_bfloat16, (nope) + (rope), (v)) \
  MLA_HOPPER_DECLARE(__half, (nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_HOPPER_DECLARE

}  // namespace mla::hopper_flash
