// The CUDA device surface the kernels use, for a host compiler under the
// emulator (MLA_SIMT_EMULATION): qualifiers, thread and block indices,
// __syncthreads, __shfl_xor_sync, min, and the fp16/bf16 types with the
// conversions the kernels call. Call sites reach the emulator's messages
// through __FILE__/__LINE__ and __builtin_FILE/__builtin_LINE defaults.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "mla/detail/numeric.hpp"
#include "simt/emulator.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

#define threadIdx (::mla::simt::thread_index())
#define blockIdx (::mla::simt::block_index())
#define blockDim (::mla::simt::block_dim())
#define gridDim (::mla::simt::grid_dim())
#define __syncthreads() ::mla::simt::sync_threads(::mla::simt::Site{__FILE__, __LINE__})
#define __syncthreads_or(predicate) \
  ::mla::simt::sync_threads_or(static_cast<int>(predicate), ::mla::simt::Site{__FILE__, __LINE__})

inline float __shfl_xor_sync(unsigned member_mask, float value, int lane_mask, int width = 32,
                             const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits = ::mla::simt::shfl_xor(bits, lane_mask, width, member_mask, ::mla::simt::Site{file, line});
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

// The emulator runs one thread at a time: a read-modify-write is atomic.
inline unsigned atomicMax(unsigned* address, unsigned value) {
  const unsigned old = *address;
  if (value > old) *address = value;
  return old;
}

// 16-bit floats as their bits: the kernels only convert and move them.
struct __half {
  std::uint16_t bits;
};
struct __half2 {
  __half x, y;
};
struct __nv_bfloat16 {
  std::uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
// cuda_fp8.h's e4m3 type, as its byte: wgmma's 8-bit operand type tag.
struct __nv_fp8_e4m3 {
  std::uint8_t __x;
};

inline __half __float2half_rn(float value) { return {::mla::numeric::float_to_half(value)}; }
inline float __half2float(__half value) { return ::mla::numeric::half_to_float(value.bits); }
inline __half __ushort_as_half(unsigned short bits) { return {bits}; }
inline unsigned short __half_as_ushort(__half value) { return value.bits; }
inline __half2 __floats2half2_rn(float lo, float hi) { return {__float2half_rn(lo), __float2half_rn(hi)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {{::mla::numeric::float_to_bf16(lo)}, {::mla::numeric::float_to_bf16(hi)}};
}
