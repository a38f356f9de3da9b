// The sm_80 instructions the kernel is built from, as inline PTX: cp.async
// with zero fill, ldmatrix (plain and transposed), mma.sync m16n8k16 with fp32
// accumulation (and m16n8k32 on e4m3, sm_89 and newer), ex2.approx.ftz, and
// the register packing of two floats into bf16x2 / f16x2.
// The instructions come from gpu_target/sm80.cuh, which each build's include
// path supplies: target/ here for nvcc, tests/support/simt/target for the GPU
// emulator (tests only); what follows them is built on them.
#pragma once

#include <type_traits>

#include "gpu_target/sm80.cuh"
#include "mla/tensor.hpp"

namespace mla::cuda_flash {

// The DType of a kernel's element type (__nv_bfloat16, __half or
// __nv_fp8_e4m3), for the host side of its launches (the recipes take a DType).
template <class T>
inline constexpr DType element_dtype = std::is_same_v<T, __nv_bfloat16>   ? DType::bfloat16
                                       : std::is_same_v<T, __nv_fp8_e4m3> ? DType::float8_e4m3
                                                                          : DType::float16;

}  // namespace mla::cuda_flash

namespace mla::cuda_flash::sm80 {

// Max and sum over the 4 lanes that share an accumulator row: the layout of
// mma.sync's and wgmma's fp32 accumulators alike. Warp shuffles, so the same
// code serves the GPU and the emulator (simt/cuda_device.hpp).
__device__ inline float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace mla::cuda_flash::sm80
