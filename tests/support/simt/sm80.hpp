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

// prmt.b32 in its default mode: byte i of the result is byte n = (selector >>
// 4i) & 7 of {y, x} (x bytes 0-3), or that byte's sign bit repeated when bit 3
// of the nibble is set.
inline std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t selector) {
  const std::uint64_t bytes = (static_cast<std::uint64_t>(y) << 32) | x;
  std::uint32_t result = 0;
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t nibble = (selector >> (4 * i)) & 0xfu;
    auto byte = static_cast<std::uint32_t>((bytes >> (8 * (nibble & 7u))) & 0xffu);
    if ((nibble & 8u) != 0) byte = (byte & 0x80u) != 0 ? 0xffu : 0u;
    result |= byte << (8 * i);
  }
  return result;
}

// cvt.rn.satfinite.e4m3x2.f32 twice: four floats to e4m3 with saturation,
// `a` in the lowest byte (the shared codec rounds and saturates the same way).
inline std::uint32_t pack_e4m3x4(float a, float b, float c, float d) {
  return static_cast<std::uint32_t>(numeric::float_to_fp8_e4m3(a)) |
         (static_cast<std::uint32_t>(numeric::float_to_fp8_e4m3(b)) << 8) |
         (static_cast<std::uint32_t>(numeric::float_to_fp8_e4m3(c)) << 16) |
         (static_cast<std::uint32_t>(numeric::float_to_fp8_e4m3(d)) << 24);
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
