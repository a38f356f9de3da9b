// The sm_90a primitives of backends/cuda/sm90_primitives.cuh, emulated: the
// same names and signatures, each an emulator call that also records the
// kernel's call site. Selected by the one #if in that header.
//
// Under the emulator the kernel's extern __shared__ array is an anchor, not
// storage: pointers into it (mbarriers, tiles) become shared addresses here
// and are never dereferenced by the kernel; every shared access goes through
// these primitives and sm80.hpp's. A `__shared__` variable declared inside the
// kernel would be a per-thread local under a host compiler, so mbarriers live
// in the dynamic array. The launcher's LaunchConfig names the anchor
// (dynamic_shared_symbol, an array of simt::shared_anchor_bytes so that the
// host compiler sees the pointer arithmetic in bounds) and the alignment the
// kernel declares for it (dynamic_shared_alignment, e.g. 1024 for 128-byte
// swizzled tiles): shared addresses start at exactly that alignment.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/sm90_tensor_map.hpp"
#include "simt/cuda_device.hpp"
#include "simt/hopper.hpp"

namespace mla::cuda_flash::sm90 {

#define MLA_SM90_SITE const char *file = __builtin_FILE(), unsigned line = __builtin_LINE()
#define MLA_SM90_AT \
  ::mla::simt::Site { file, line }

inline std::uint32_t shared_address(const void* ptr, MLA_SM90_SITE) {
  return simt::shared_address_of(ptr, MLA_SM90_AT);
}

inline void mbarrier_init(std::uint64_t* bar, unsigned arrival_count, MLA_SM90_SITE) {
  simt::mbarrier_init(simt::shared_address_of(bar, MLA_SM90_AT), arrival_count, MLA_SM90_AT);
}
inline void fence_barrier_init(MLA_SM90_SITE) { simt::fence_barrier_init(MLA_SM90_AT); }
inline void mbarrier_arrive(std::uint64_t* bar, MLA_SM90_SITE) {
  simt::mbarrier_arrive(simt::shared_address_of(bar, MLA_SM90_AT), 0, MLA_SM90_AT);
}
inline void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned tx_bytes, MLA_SM90_SITE) {
  simt::mbarrier_arrive(simt::shared_address_of(bar, MLA_SM90_AT), tx_bytes, MLA_SM90_AT);
}
inline void mbarrier_expect_tx(std::uint64_t* bar, unsigned tx_bytes, MLA_SM90_SITE) {
  simt::mbarrier_expect_tx(simt::shared_address_of(bar, MLA_SM90_AT), tx_bytes, MLA_SM90_AT);
}
inline bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned phase_parity, MLA_SM90_SITE) {
  return simt::mbarrier_try_wait_parity(simt::shared_address_of(bar, MLA_SM90_AT), phase_parity, MLA_SM90_AT);
}
inline void mbarrier_wait_parity(std::uint64_t* bar, unsigned phase_parity, MLA_SM90_SITE) {
  simt::mbarrier_wait_parity(simt::shared_address_of(bar, MLA_SM90_AT), phase_parity, MLA_SM90_AT);
}

inline void prefetch_tensor_map(const TensorMap* map, MLA_SM90_SITE) { simt::prefetch_tensor_map(*map, MLA_SM90_AT); }
inline void tma_load_2d(void* smem_dst, const TensorMap* map, std::uint64_t* bar, int c0, int c1, MLA_SM90_SITE) {
  const int coords[2] = {c0, c1};
  simt::tma_load(simt::shared_address_of(smem_dst, MLA_SM90_AT), *map, simt::shared_address_of(bar, MLA_SM90_AT),
                 coords, 2, MLA_SM90_AT);
}
inline void tma_load_3d(void* smem_dst, const TensorMap* map, std::uint64_t* bar, int c0, int c1, int c2,
                        MLA_SM90_SITE) {
  const int coords[3] = {c0, c1, c2};
  simt::tma_load(simt::shared_address_of(smem_dst, MLA_SM90_AT), *map, simt::shared_address_of(bar, MLA_SM90_AT),
                 coords, 3, MLA_SM90_AT);
}
inline void tma_store_2d(const TensorMap* map, const void* smem_src, int c0, int c1, MLA_SM90_SITE) {
  const int coords[2] = {c0, c1};
  simt::tma_store(*map, simt::shared_address_of(smem_src, MLA_SM90_AT), coords, 2, MLA_SM90_AT);
}
inline void tma_store_3d(const TensorMap* map, const void* smem_src, int c0, int c1, int c2, MLA_SM90_SITE) {
  const int coords[3] = {c0, c1, c2};
  simt::tma_store(*map, simt::shared_address_of(smem_src, MLA_SM90_AT), coords, 3, MLA_SM90_AT);
}
inline void tma_store_commit_group(MLA_SM90_SITE) { simt::tma_store_commit(MLA_SM90_AT); }
template <int Pending>
inline void tma_store_wait(MLA_SM90_SITE) {
  simt::tma_store_wait(Pending, MLA_SM90_AT);
}
inline void fence_proxy_async_shared(MLA_SM90_SITE) { simt::fence_proxy_async(MLA_SM90_AT); }

// The descriptor bits as on the GPU (see sm90_primitives.cuh); the emulator decodes them.
inline std::uint64_t make_smem_descriptor(const void* smem, Swizzle swizzle, unsigned leading_byte_offset,
                                          unsigned stride_byte_offset, MLA_SM90_SITE) {
  const std::uint64_t start = (simt::shared_address_of(smem, MLA_SM90_AT) & 0x3ffffu) >> 4;
  const std::uint64_t lbo = (leading_byte_offset & 0x3ffffu) >> 4;
  const std::uint64_t sbo = (stride_byte_offset & 0x3ffffu) >> 4;
  return start | (lbo << 16) | (sbo << 32) | (static_cast<std::uint64_t>(swizzle) << 62);
}

inline void wgmma_fence(MLA_SM90_SITE) { simt::wgmma_fence(MLA_SM90_AT); }
inline void wgmma_commit_group(MLA_SM90_SITE) { simt::wgmma_commit(MLA_SM90_AT); }
template <int Pending>
inline void wgmma_wait_group(MLA_SM90_SITE) {
  simt::wgmma_wait(Pending, MLA_SM90_AT);
}
template <int Count>
inline void wgmma_fence_operand(float (&)[Count]) {}

template <class T>
constexpr simt::Element sm90_element() {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_fp8_e4m3>,
                "wgmma: bf16, fp16 or e4m3");
  if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) return simt::Element::e4m3;
  return std::is_same_v<T, __nv_bfloat16> ? simt::Element::bfloat16 : simt::Element::float16;
}

template <class T, int N, bool TransB>
inline void wgmma_ss(float (&d)[N / 2], std::uint64_t a_desc, std::uint64_t b_desc, int scale_d, MLA_SM90_SITE) {
  static_assert(N == 64 || N == 96 || N == 128 || N == 192 || N == 256, "wgmma: N in {64, 96, 128, 192, 256}");
  static_assert(!(TransB && std::is_same_v<T, __nv_fp8_e4m3>), "wgmma: 8-bit operands are K-major only");
  simt::wgmma(sm90_element<T>(), N, TransB, d, nullptr, a_desc, b_desc, scale_d, MLA_SM90_AT);
}

template <class T, int N, bool TransB>
inline void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b_desc, int scale_d, MLA_SM90_SITE) {
  static_assert(N == 64 || N == 96 || N == 128 || N == 192 || N == 256, "wgmma: N in {64, 96, 128, 192, 256}");
  static_assert(!(TransB && std::is_same_v<T, __nv_fp8_e4m3>), "wgmma: 8-bit operands are K-major only");
  simt::wgmma(sm90_element<T>(), N, TransB, d, a, 0, b_desc, scale_d, MLA_SM90_AT);
}

inline void named_barrier_sync(unsigned id, unsigned thread_count, MLA_SM90_SITE) {
  simt::named_barrier(id, thread_count, true, MLA_SM90_AT);
}
inline void named_barrier_arrive(unsigned id, unsigned thread_count, MLA_SM90_SITE) {
  simt::named_barrier(id, thread_count, false, MLA_SM90_AT);
}
inline bool elect_one_sync(MLA_SM90_SITE) { return simt::elect_one(MLA_SM90_AT); }
template <int Registers>
inline void setmaxnreg_increase(MLA_SM90_SITE) {
  simt::setmaxnreg(true, Registers, MLA_SM90_AT);
}
template <int Registers>
inline void setmaxnreg_decrease(MLA_SM90_SITE) {
  simt::setmaxnreg(false, Registers, MLA_SM90_AT);
}
inline void stmatrix_x4(std::uint32_t address, const std::uint32_t (&r)[4], MLA_SM90_SITE) {
  simt::stmatrix(false, address, r, MLA_SM90_AT);
}
inline void stmatrix_x4_trans(std::uint32_t address, const std::uint32_t (&r)[4], MLA_SM90_SITE) {
  simt::stmatrix(true, address, r, MLA_SM90_AT);
}
inline void ld_shared_v4(std::uint32_t (&r)[4], std::uint32_t address, MLA_SM90_SITE) {
  simt::load_shared_16(r, address, MLA_SM90_AT);
}
inline int atomic_add_global(int* address, int value, MLA_SM90_SITE) {
  return simt::atomic_add(address, value, MLA_SM90_AT);
}

#undef MLA_SM90_AT
#undef MLA_SM90_SITE

}  // namespace mla::cuda_flash::sm90
