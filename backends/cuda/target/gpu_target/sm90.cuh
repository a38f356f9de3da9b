// The sm_90a instructions of cuda/sm90_primitives.cuh as inline PTX, for nvcc
// (the GPU emulator supplies the same names from tests/support/simt/target).
#pragma once

#include "cuda/sm90_tensor_map.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace mla::cuda_flash::sm90 {

__device__ inline std::uint32_t shared_address(const void* ptr) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(ptr));
}

// ---- mbarrier: a 64-bit object in shared memory, 8-byte aligned ----

__device__ inline void mbarrier_init(std::uint64_t* bar, unsigned arrival_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(arrival_count) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA) and to
// other threads before their first use.
__device__ inline void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ inline void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}

// Arrives and raises the phase's expected transaction bytes in one step.
__device__ inline void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(tx_bytes)
               : "memory");
}

__device__ inline void mbarrier_expect_tx(std::uint64_t* bar, unsigned tx_bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(tx_bytes)
               : "memory");
}

// True once the phase with parity `phase_parity` has completed.
__device__ inline bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned phase_parity) {
  std::uint32_t done = 0;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(phase_parity)
      : "memory");
  return done != 0;
}

__device__ inline void mbarrier_wait_parity(std::uint64_t* bar, unsigned phase_parity) {
  while (!mbarrier_try_wait_parity(bar, phase_parity)) {
  }
}

// ---- TMA: cp.async.bulk.tensor, coordinates in elements, innermost first ----

__device__ inline void prefetch_tensor_map(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

// The box lands in shared memory and completes its bytes on `bar`.
__device__ inline void tma_load_2d(void* smem_dst, const TensorMap* map, std::uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          shared_address(smem_dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(shared_address(bar)), "r"(c0), "r"(c1)
      : "memory");
}

__device__ inline void tma_load_3d(void* smem_dst, const TensorMap* map, std::uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(shared_address(smem_dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(shared_address(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

__device__ inline void tma_store_2d(const TensorMap* map, const void* smem_src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(shared_address(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}

__device__ inline void tma_store_3d(const TensorMap* map, const void* smem_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(shared_address(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

__device__ inline void tma_store_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until at most `Pending` committed store groups still read shared memory.
template <int Pending>
__device__ inline void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later
// async-proxy (TMA, wgmma) accesses.
__device__ inline void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- wgmma: one warpgroup (4 consecutive warps from a warp index divisible by 4) ----

// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address,
// leading and stride byte offsets, each >> 4 in 14 bits; base offset 0 (the
// tile starts on its swizzle pattern's boundary); swizzle mode in bits 62-63.
__device__ inline std::uint64_t make_smem_descriptor(const void* smem, Swizzle swizzle, unsigned leading_byte_offset,
                                                     unsigned stride_byte_offset) {
  const std::uint64_t start = (shared_address(smem) & 0x3ffffu) >> 4;
  const std::uint64_t lbo = (leading_byte_offset & 0x3ffffu) >> 4;
  const std::uint64_t sbo = (stride_byte_offset & 0x3ffffu) >> 4;
  return start | (lbo << 16) | (sbo << 32) | (static_cast<std::uint64_t>(swizzle) << 62);
}

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int Pending>
__device__ inline void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// Pins the accumulators in registers at this point of the program: the
// compiler may not move their reads or writes across it (around an issue and
// after the wait that retires it).
template <int Count>
__device__ inline void wgmma_fence_operand(float (&d)[Count]) {
#pragma unroll
  for (int i = 0; i < Count; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

namespace detail {

#define MLA_SM90_ACC8(i)                                                                                  \
  "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
      "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define MLA_SM90_ACC32(i) MLA_SM90_ACC8(i), MLA_SM90_ACC8((i) + 8), MLA_SM90_ACC8((i) + 16), MLA_SM90_ACC8((i) + 24)

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}: operands after the
// descriptors are scale-d (predicate), imm-scale-a, imm-scale-b, [imm-trans-a,]
// imm-trans-b.
template <class T, int N>
struct WgmmaPtx;

template <>
struct WgmmaPtx<__nv_bfloat16, 64> {
  template <bool TransB>
  __device__ static void ss(float (&d)[32], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, "
        "1, 1, 0, %35;\n}\n"
        : MLA_SM90_ACC32(0)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, "
        "%34, %35}, %36, p, 1, 1, %38;\n}\n"
        : MLA_SM90_ACC32(0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__half, 64> {
  template <bool TransB>
  __device__ static void ss(float (&d)[32], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, "
        "1, 1, 0, %35;\n}\n"
        : MLA_SM90_ACC32(0)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, "
        "%34, %35}, %36, p, 1, 1, %38;\n}\n"
        : MLA_SM90_ACC32(0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__nv_bfloat16, 96> {
  template <bool TransB>
  __device__ static void ss(float (&d)[48], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1, 0, %51;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC8(32), MLA_SM90_ACC8(40)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[48], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, {%48, %49, %50, %51}, %52, p, 1, 1, "
        "%54;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC8(32), MLA_SM90_ACC8(40)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__half, 96> {
  template <bool TransB>
  __device__ static void ss(float (&d)[48], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1, 0, %51;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC8(32), MLA_SM90_ACC8(40)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[48], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, {%48, %49, %50, %51}, %52, p, 1, 1, "
        "%54;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC8(32), MLA_SM90_ACC8(40)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__nv_bfloat16, 128> {
  template <bool TransB>
  __device__ static void ss(float (&d)[64], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__half, 128> {
  template <bool TransB>
  __device__ static void ss(float (&d)[64], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__nv_bfloat16, 192> {
  template <bool TransB>
  __device__ static void ss(float (&d)[96], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, "
        "%99;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[96], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, "
        "%100, p, 1, 1, %102;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__half, 192> {
  template <bool TransB>
  __device__ static void ss(float (&d)[96], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, "
        "%99;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[96], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, "
        "%100, p, 1, 1, %102;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__nv_bfloat16, 256> {
  template <bool TransB>
  __device__ static void ss(float (&d)[128], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
        "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
        "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, %131;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64), MLA_SM90_ACC32(96)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[128], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
        "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
        "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, "
        "%134;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64), MLA_SM90_ACC32(96)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

template <>
struct WgmmaPtx<__half, 256> {
  template <bool TransB>
  __device__ static void ss(float (&d)[128], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
        "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
        "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, %131;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64), MLA_SM90_ACC32(96)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[128], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
        "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
        "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, "
        "%134;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64), MLA_SM90_ACC32(96)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(int(TransB)));
  }
};

// wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3: both operands K-major
// (8-bit types have no transpose), so there is no imm-trans operand; after
// the descriptors come scale-d (predicate), imm-scale-a, imm-scale-b.

template <>
struct WgmmaPtx<__nv_fp8_e4m3, 64> {
  template <bool TransB>
  __device__ static void ss(float (&d)[32], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, "
        "1, 1;\n}\n"
        : MLA_SM90_ACC32(0)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, "
        "%34, %35}, %36, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
  }
};

template <>
struct WgmmaPtx<__nv_fp8_e4m3, 96> {
  template <bool TransB>
  __device__ static void ss(float (&d)[48], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC8(32), MLA_SM90_ACC8(40)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[48], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, {%48, %49, %50, %51}, %52, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC8(32), MLA_SM90_ACC8(40)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
  }
};

template <>
struct WgmmaPtx<__nv_fp8_e4m3, 128> {
  template <bool TransB>
  __device__ static void ss(float (&d)[64], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
  }
};

template <>
struct WgmmaPtx<__nv_fp8_e4m3, 192> {
  template <bool TransB>
  __device__ static void ss(float (&d)[96], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[96], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, {%96, %97, %98, %99}, "
        "%100, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
  }
};

template <>
struct WgmmaPtx<__nv_fp8_e4m3, 256> {
  template <bool TransB>
  __device__ static void ss(float (&d)[128], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
        "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
        "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64), MLA_SM90_ACC32(96)
        : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
  template <bool TransB>
  __device__ static void rs(float (&d)[128], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
    static_assert(!TransB, "wgmma: 8-bit operands are K-major only");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "
        "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
        "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
        : MLA_SM90_ACC32(0), MLA_SM90_ACC32(32), MLA_SM90_ACC32(64), MLA_SM90_ACC32(96)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
  }
};

#undef MLA_SM90_ACC32
#undef MLA_SM90_ACC8

}  // namespace detail

// d (+)= A(64x16) * B(16xN): N/2 fp32 accumulators per thread in the m64nNk16
// D-fragment layout; scale_d 0 overwrites, 1 accumulates. TransB false: B is
// K-major, true: MN-major. T = __nv_fp8_e4m3: A(64x32) * B(32xN), K-major only.
template <class T, int N, bool TransB>
__device__ inline void wgmma_ss(float (&d)[N / 2], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d) {
  detail::WgmmaPtx<T, N>::template ss<TransB>(d, a_desc, b_desc, scale_d);
}

// A from registers: 4 x 32-bit per thread in the m64k16 A-fragment layout
// (m64k32, four e4m3 per register, for __nv_fp8_e4m3).
template <class T, int N, bool TransB>
__device__ inline void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d) {
  detail::WgmmaPtx<T, N>::template rs<TransB>(d, a, b_desc, scale_d);
}

// ---- warps and warpgroups ----

// thread_count is a multiple of the warp size; id 0 is __syncthreads' barrier.
__device__ inline void named_barrier_sync(unsigned id, unsigned thread_count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(thread_count) : "memory");
}

__device__ inline void named_barrier_arrive(unsigned id, unsigned thread_count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(thread_count) : "memory");
}

__device__ inline bool elect_one_sync() {
  std::uint32_t elected = 0;
  asm volatile(
      "{\n.reg .pred p;\n"
      "elect.sync _|p, %1;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(elected)
      : "r"(0xffffffffu));
  return elected != 0;
}

// Registers per thread for the whole warpgroup: 24..256, a multiple of 8.
template <int Registers>
__device__ inline void setmaxnreg_increase() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

template <int Registers>
__device__ inline void setmaxnreg_decrease() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

// Four 8x8 b16 matrices from registers to shared memory: lane 8m + r gives the
// address of row r of matrix m; lane l holds in r[m] (row l/4, cols 2(l%4), +1).
__device__ inline void stmatrix_x4(std::uint32_t address, const std::uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

__device__ inline void stmatrix_x4_trans(std::uint32_t address, const std::uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// 16 bytes of shared memory into four registers (one thread, generic proxy).
__device__ inline void ld_shared_v4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

__device__ inline int atomic_add_global(int* address, int value) { return atomicAdd(address, value); }

}  // namespace mla::cuda_flash::sm90
