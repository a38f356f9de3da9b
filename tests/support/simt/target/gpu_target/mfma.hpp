// The MFMA products of hip/mfma.hpp under the GPU emulator (a host clang
// compiles the HIP kernel, hip_emulated.cmake), with the HIP device surface
// of simt/hip_device.hpp; the emulated target (gfx90a, gfx908 or gfx942) is
// chosen per launch.
#pragma once

#include <cstdint>
#include <cstring>

#include "simt/hip_device.hpp"

// Every tile family's kernel is real under the emulator (a HIP compile keeps
// only its target's family, backends/hip/target/gpu_target/mfma.hpp).
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

// acc += A * B for one 32x32x16 step of CDNA3 FNUZ e4m3 values, 8 per lane
// as one 64-bit word (lowest byte first): v_mfma_f32_32x32x16_fp8_fp8.
__device__ inline Accumulator product_fp8(long a, long b, Accumulator acc, const char* file = __builtin_FILE(),
                                          unsigned line = __builtin_LINE()) {
  float c[16];
  std::memcpy(c, &acc, sizeof c);
  simt::mfma_32x32x16_fp8(c, static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b), simt::Site{file, line});
  std::memcpy(&acc, c, sizeof c);
  return acc;
}

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
