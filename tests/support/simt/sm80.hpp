// The sm_80 primitives of backends/cuda/sm80_primitives.cuh, emulated: the
// same names and signatures, each an emulator call that also records the
// kernel's call site. Selected by the one #if in that header.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simt/cost.hpp"
#include "simt/cuda_device.hpp"

namespace mla::cuda_flash::sm80 {

inline std::uint32_t shared_address(const void* ptr, const char* file = __builtin_FILE(),
                                    unsigned line = __builtin_LINE()) {
  return simt::shared_address(ptr, {file, line});
}

inline void cp_async_16(std::uint32_t dst, const void* src, bool fill, const char* file = __builtin_FILE(),
                        unsigned line = __builtin_LINE()) {
  simt::cp_async_16(dst, src, fill, {file, line});
}

inline void cp_async_commit() { simt::cp_async_commit(); }

// A plain global load, counted by the cost model (simt/cost.hpp).
template <class T>
inline T load_global(const T* address, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  simt::count_global_lane_read(address, sizeof(T), file, line);
  return *address;
}

template <int Pending>
inline void cp_async_wait(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  simt::cp_async_wait(Pending, {file, line});
}

inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address, const char* file = __builtin_FILE(),
                        unsigned line = __builtin_LINE()) {
  simt::ldmatrix(4, false, r, address, {file, line});
}

inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address, const char* file = __builtin_FILE(),
                              unsigned line = __builtin_LINE()) {
  simt::ldmatrix(4, true, r, address, {file, line});
}

template <class T>
inline void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
                      const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  constexpr simt::Element element = std::is_same_v<T, __nv_bfloat16> ? simt::Element::bfloat16 : simt::Element::float16;
  simt::mma_m16n8k16(element, d, a, b0, b1, {file, line});
}

// d = a * b + d for a 16x32 (A) by 32x8 (B) product of e4m3 values, fp32 accumulators.
inline void mma_16832_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
                           const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  simt::mma_m16n8k32_e4m3(d, a, b0, b1, {file, line});
}

// ex2.approx.ftz.f32: denormal inputs read as 0, denormal results become 0;
// the host's exp2f stands in for the unit's approximation (within 2 ulp).
inline float exp2_ftz(float x) {
  simt::count_exp();
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float y = std::exp2f(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

template <class T>
struct Pack2;

template <>
struct Pack2<__nv_bfloat16> {
  std::uint32_t operator()(float lo, float hi) const {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return static_cast<std::uint32_t>(v.x.bits) | (static_cast<std::uint32_t>(v.y.bits) << 16);
  }
};

template <>
struct Pack2<__half> {
  std::uint32_t operator()(float lo, float hi) const {
    const __half2 v = __floats2half2_rn(lo, hi);
    return static_cast<std::uint32_t>(v.x.bits) | (static_cast<std::uint32_t>(v.y.bits) << 16);
  }
};

}  // namespace mla::cuda_flash::sm80
