// The HIP device surface the HIP_FLASH kernel uses, for a host clang under the
// emulator (MLA_SIMT_EMULATION): qualifiers, static __shared__ arrays, thread
// and block indices, __syncthreads, __shfl_xor, min and max, and the AMD
// target whose MFMA forms mfma.hpp emulates. Call sites reach the emulator's
// messages through __FILE__/__LINE__ and __builtin_FILE/__builtin_LINE
// defaults. Included through backends/hip/mfma.hpp only.
#pragma once

#if !defined(__clang__)
#error "the emulated HIP kernel needs clang (ext_vector_type, _Float16)"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simt/emulator.hpp"
#include "simt/hip_flash_emulated.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

// Static __shared__ arrays are function-local statics in one section, so that
// the launcher finds them all (mla::simt::static_lds) and the emulator poisons
// them when each block starts. One set per program: launches of HIP kernels
// from two host threads at once would share them.
#define __shared__ [[gnu::section("mla_simt_lds")]] static

#define threadIdx (::mla::simt::thread_index())
#define blockIdx (::mla::simt::block_index())
#define blockDim (::mla::simt::block_dim())
#define gridDim (::mla::simt::grid_dim())
#define __syncthreads() ::mla::simt::sync_threads(::mla::simt::Site{__FILE__, __LINE__})
#define __syncthreads_or(predicate) \
  ::mla::simt::sync_threads_or(static_cast<int>(predicate), ::mla::simt::Site{__FILE__, __LINE__})

// Bounds of the section, from the linker (it defines them for every section
// whose name is a C identifier). Hidden: a shared object sees its own.
extern "C" {
[[gnu::visibility("hidden")]] extern unsigned char __start_mla_simt_lds[];
[[gnu::visibility("hidden")]] extern unsigned char __stop_mla_simt_lds[];
}

namespace mla::simt {

// The static LDS of every emulated HIP kernel: LaunchConfig::static_shared(_bytes).
inline void* static_lds() { return __start_mla_simt_lds; }
inline std::size_t static_lds_bytes() { return static_cast<std::size_t>(__stop_mla_simt_lds - __start_mla_simt_lds); }

// The AMD target of the launch in progress on this thread (the MFMA forms
// mfma.hpp emulates); launch_hip_flash_emulated sets it. gfx90a outside a launch.
AmdTarget emulated_amd_target();

}  // namespace mla::simt

// HIP's wave64 __shfl_xor on a float: every lane of the wave takes part.
inline float __shfl_xor(float var, int lane_mask, int width = 64, const char* file = __builtin_FILE(),
                        unsigned line = __builtin_LINE()) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &var, sizeof bits);
  bits = ::mla::simt::shfl_xor(bits, lane_mask, width, ~std::uint64_t{0}, ::mla::simt::Site{file, line});
  std::memcpy(&var, &bits, sizeof var);
  return var;
}

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
