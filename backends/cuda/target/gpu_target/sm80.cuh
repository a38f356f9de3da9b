// The sm_80 instructions of cuda/sm80_primitives.cuh as inline PTX, for nvcc
// (the GPU emulator supplies the same names from tests/support/simt/target).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace mla::cuda_flash::sm80 {

__device__ inline std::uint32_t shared_address(const void* ptr) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(ptr));
}

// 16 bytes global -> shared, bypassing L1. `fill` false writes 16 zero bytes
// and reads nothing: rows past a sequence's end become zeros, so masked keys
// never multiply garbage (0 * NaN) in P V.
__device__ inline void cp_async_16(std::uint32_t dst, const void* src, bool fill) {
  const int src_bytes = fill ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// A plain global load, named so that the emulator can count it (its cost
// model's sectors per warp-wide request); here just the load.
template <class T>
__device__ inline T load_global(const T* address) {
  return *address;
}

// Waits until at most `Pending` of this thread's committed groups are in flight.
template <int Pending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// volatile: the compiler must not hoist a shared-memory read above the
// barrier that publishes the data.
__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d = a * b + d for a 16x16 (A) by 16x8 (B) product, fp32 accumulators.
template <class T>
__device__ inline void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1);

template <>
__device__ inline void mma_16816<__nv_bfloat16>(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                                std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ inline void mma_16816<__half>(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d = a * b + d for a 16x32 (A) by 32x8 (B) product of e4m3 values, fp32
// accumulators: four e4m3 per register. The instruction exists on sm_89 and
// newer; compiled for an older target the call traps, so a caller must be
// chosen for 8.9+ devices only.
__device__ inline void mma_16832_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  (void)d;
  (void)a;
  (void)b0;
  (void)b1;
  __trap();
#else
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Bytes of {y, x} picked by the selector's four nibbles (prmt.b32): byte i of
// the result is byte (selector >> 4i) & 7 of x (0-3) or y (4-7).
__device__ inline std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t selector) {
  return __byte_perm(x, y, selector);
}

// Four floats rounded to nearest e4m3 with saturation to ±448 (NaN stays
// NaN), `a` in the lowest byte: the A operand of mma m16n8k32 from fp32
// values. sm_89 and newer, like the mma that reads it (whose only caller,
// the e4m3 kernel, is compiled for sm_89 and sm_120+ alone).
__device__ inline std::uint32_t pack_e4m3x4(float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  (void)a;
  (void)b;
  (void)c;
  (void)d;
  __trap();
  return 0;
#else
  // cvt puts its first source in the upper byte.
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
#endif
}

// 2^x as the special-function unit computes it, denormal inputs and results
// flushed to zero: one MUFU.EX2. exp2f adds a range check and two multiplies
// around it to keep denormal results, which softmax weights never need.
__device__ inline float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to nearest into one register, `lo` in the low 16 bits.
template <class T>
struct Pack2;

template <>
struct Pack2<__nv_bfloat16> {
  __device__ std::uint32_t operator()(float lo, float hi) const {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
};

template <>
struct Pack2<__half> {
  __device__ std::uint32_t operator()(float lo, float hi) const {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
};

}  // namespace mla::cuda_flash::sm80
