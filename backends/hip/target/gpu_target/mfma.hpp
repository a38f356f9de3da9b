// The MFMA products of hip/mfma.hpp for a HIP compile, and the device macros
// that gate them (read from clang's own __gfx*__ defines).
#pragma once

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

// acc += A * B for one 32x32x16 step of 8-bit floats, 8 per lane as one
// 64-bit word (lowest byte first): v_mfma_f32_32x32x16_fp8_fp8. On CDNA3
// (gfx940-942) the bytes are FNUZ e4m3 (bias 8, NaN 0x80, largest 240), not
// OCP's float8_e4m3fn; other targets trap (gfx950 reads OCP bytes and is not
// served yet).
__device__ inline Accumulator product_fp8(long a, long b, Accumulator acc) {
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
  return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, acc, 0, 0, 0);
#else
  (void)a;
  (void)b;
  __builtin_trap();
  return acc;
#endif
}

}  // namespace mla::hip_flash::mfma
