// The MFMA tile product of the HIP_FLASH kernel and the device macros that
// gate it. Included only by HIP sources and, with MLA_SIMT_EMULATION, by the
// GPU emulator's host clang compile of the kernel (backends/simt), which gets
// the device surface from simt/hip_device.hpp and the products from the
// emulator; the emulated target (gfx90a, gfx908 or gfx942) is chosen per launch.
//
// Gating happens twice (as in ggml): here by device macro, derived from the
// gfx target clang is compiling for, and on the host by the list of targets
// the build compiled (backends/hip/entry.cpp), so a target without MFMA never
// gets a launch. The macros read clang's own __gfx*__ defines; nothing fakes
// another vendor's arch macro.
#pragma once

#include "mfma_layout.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash::mfma {

// One lane's share of a k-step: 4 fp16 or bf16 values as raw 16-bit words.
using Operand = short __attribute__((ext_vector_type(4)));
// One lane's 16 accumulators of a 32x32 fp32 tile.
using Accumulator = float __attribute__((ext_vector_type(16)));

}  // namespace mla::hip_flash::mfma

#if defined(MLA_SIMT_EMULATION)

#include <cstdint>
#include <cstring>

#include "simt/hip_device.hpp"

// Every tile family's kernel is real under the emulator (see below).
#define MLA_AMD_TILE_FAMILY -1

namespace mla::hip_flash::mfma {

// acc += A * B for one 32x32x8 step, by the emulator's MFMA semantics; the
// defaults name the kernel's call site in the emulator's messages (and tell
// the S^T product from the O^T one when it checks that a wave's lanes meet).
// Accumulators pass by value as on the GPU; the host ABI of a 64-byte vector
// does not matter inside one translation unit (hip_emulated.cmake: -Wno-psabi).
template <DType D>
__device__ inline Accumulator product(const Operand& a, const Operand& b, Accumulator acc,
                                      const char* file = __builtin_FILE(), unsigned line = __builtin_LINE());

namespace emulated {

using Short2 = short __attribute__((ext_vector_type(2)));

inline Accumulator mfma_32x32x8(simt::Element element, const Operand& a, const Operand& b, Accumulator acc,
                                simt::Site site) {
  float c[16];
  std::uint16_t x[4];
  std::uint16_t y[4];
  std::memcpy(c, &acc, sizeof c);
  for (int e = 0; e < 4; ++e) {
    x[e] = static_cast<std::uint16_t>(a[e]);
    y[e] = static_cast<std::uint16_t>(b[e]);
  }
  simt::mfma_32x32x8(element, c, x, y, site);
  std::memcpy(&acc, c, sizeof c);
  return acc;
}

inline Accumulator mfma_32x32x4_bf16(Short2 a, Short2 b, Accumulator acc, simt::Site site) {
  float c[16];
  const std::uint16_t x[2] = {static_cast<std::uint16_t>(a[0]), static_cast<std::uint16_t>(a[1])};
  const std::uint16_t y[2] = {static_cast<std::uint16_t>(b[0]), static_cast<std::uint16_t>(b[1])};
  std::memcpy(c, &acc, sizeof c);
  simt::mfma_32x32x4_bf16(c, x, y, site);
  std::memcpy(&acc, c, sizeof c);
  return acc;
}

}  // namespace emulated

template <>
__device__ inline Accumulator product<DType::float16>(const Operand& a, const Operand& b, Accumulator acc,
                                                      const char* file, unsigned line) {
  return emulated::mfma_32x32x8(simt::Element::float16, a, b, acc, simt::Site{file, line});
}

template <>
__device__ inline Accumulator product<DType::bfloat16>(const Operand& a, const Operand& b, Accumulator acc,
                                                       const char* file, unsigned line) {
  const simt::Site site{file, line};
  if (simt::emulated_amd_target() == simt::AmdTarget::gfx908) {
    // As the gfx908 branch below: values 0-1 then 2-3 of both operands.
    using emulated::Short2;
    acc = emulated::mfma_32x32x4_bf16(Short2{a[0], a[1]}, Short2{b[0], b[1]}, acc, site);
    return emulated::mfma_32x32x4_bf16(Short2{a[2], a[3]}, Short2{b[2], b[3]}, acc, site);
  }
  return emulated::mfma_32x32x8(simt::Element::bfloat16, a, b, acc, site);
}

}  // namespace mla::hip_flash::mfma

#else  // a HIP compile

#include <hip/hip_runtime.h>

// Targets with 32x32x8 fp16 MFMA: CDNA1 (gfx908), CDNA2 (gfx90a), CDNA3
// (gfx940-942), CDNA4 (gfx950). Only ever 1 inside a device pass.
#if defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || \
    defined(__gfx950__)
#define MLA_AMD_MFMA_AVAILABLE 1
#else
#define MLA_AMD_MFMA_AVAILABLE 0
#endif

// The 4-wide bf16 form (v_mfma_f32_32x32x8bf16_1k) arrived with gfx90a; gfx908
// has only the 2-wide one.
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define MLA_AMD_MFMA_BF16_1K 1
#else
#define MLA_AMD_MFMA_BF16_1K 0
#endif

// The tile family (flash_config.hpp's TileFamily) whose attention kernels a
// device pass compiles: its own generation's rows. The other family's kernels
// become traps that the host never launches (it picks the family of the
// device), so each target compiles each shape once. -1, every family, in the
// host pass, on targets without MFMA and under the emulator.
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define MLA_AMD_TILE_FAMILY 1
#elif defined(__gfx908__) || defined(__gfx90a__)
#define MLA_AMD_TILE_FAMILY 0
#else
#define MLA_AMD_TILE_FAMILY -1
#endif

namespace mla::hip_flash::mfma {

// acc += A * B for one 32x32x8 step; layouts in mfma_layout.hpp.
template <DType D>
__device__ inline Accumulator product(const Operand& a, const Operand& b, Accumulator acc);

template <>
__device__ inline Accumulator product<DType::float16>(const Operand& a, const Operand& b, Accumulator acc) {
#if MLA_AMD_MFMA_AVAILABLE
  using Half4 = _Float16 __attribute__((ext_vector_type(4)));
  return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(Half4, a), __builtin_bit_cast(Half4, b), acc, 0, 0, 0);
#else
  // Host pass, or a target without MFMA that the host predicate never launches on.
  (void)a;
  (void)b;
  __builtin_trap();
  return acc;
#endif
}

template <>
__device__ inline Accumulator product<DType::bfloat16>(const Operand& a, const Operand& b, Accumulator acc) {
#if MLA_AMD_MFMA_BF16_1K
  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
#elif MLA_AMD_MFMA_AVAILABLE
  // gfx908: two 2-wide products; values 0-1 then 2-3 of both operands (the
  // k reordering is harmless, see mfma_layout.hpp).
  using Short2 = short __attribute__((ext_vector_type(2)));
  acc = __builtin_amdgcn_mfma_f32_32x32x4bf16(Short2{a[0], a[1]}, Short2{b[0], b[1]}, acc, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_32x32x4bf16(Short2{a[2], a[3]}, Short2{b[2], b[3]}, acc, 0, 0, 0);
#else
  (void)a;
  (void)b;
  __builtin_trap();
  return acc;
#endif
}

}  // namespace mla::hip_flash::mfma

#endif  // MLA_SIMT_EMULATION

// After the device surface: its qualifiers are defined now.
#include "mla/detail/numeric.hpp"

namespace mla::hip_flash::mfma {

// float -> the 16-bit word of an operand in dtype D, rounded to nearest even.
template <DType D>
__device__ inline short to_bits(float value) {
  if constexpr (D == DType::bfloat16) {
    return static_cast<short>(numeric::float_to_bf16(value));
  } else {
    return __builtin_bit_cast(short, static_cast<_Float16>(value));
  }
}

}  // namespace mla::hip_flash::mfma
