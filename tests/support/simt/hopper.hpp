// What the emulated sm_90 primitives (simt/sm90.hpp) call: warpgroup MMA with
// shared-memory descriptors, mbarriers with phases and transaction counts, the
// tensor memory accelerator on an emulated tensor map, proxy fences, named
// barriers, elect.sync, setmaxnreg, stmatrix, 16-byte shared loads and global
// atomics. Semantics from the PTX ISA; the checks are described in emulator.hpp.
#pragma once

#include <cstdint>

#include "simt/emulator.hpp"
#include "simt/sm90_tensor_map.hpp"

namespace mla::simt {

// The shared address of `ptr`, which must point into the kernel's extern
// __shared__ array (at any offset). Under the emulator that array is an
// anchor: its bytes are never read or written, only addresses derived from it.
std::uint32_t shared_address_of(const void* ptr, Site site);

void mbarrier_init(std::uint32_t bar, unsigned arrival_count, Site site);
void fence_barrier_init(Site site);
// One arrival; `expect_tx` bytes are added to the phase's transaction count first.
void mbarrier_arrive(std::uint32_t bar, unsigned expect_tx, Site site);
void mbarrier_expect_tx(std::uint32_t bar, unsigned tx_bytes, Site site);
// try_wait yields to the other threads before it answers "not yet", so a spin
// on it makes progress and a spin that can never end is a deadlock.
bool mbarrier_try_wait_parity(std::uint32_t bar, unsigned parity, Site site);
void mbarrier_wait_parity(std::uint32_t bar, unsigned parity, Site site);

void prefetch_tensor_map(const cuda_flash::sm90::TensorMap& map, Site site);
// cp.async.bulk.tensor, `rank` coordinates (elements, innermost first).
void tma_load(std::uint32_t dst, const cuda_flash::sm90::TensorMap& map, std::uint32_t bar, const int* coords, int rank,
              Site site);
void tma_store(const cuda_flash::sm90::TensorMap& map, std::uint32_t src, const int* coords, int rank, Site site);
void tma_store_commit(Site site);
void tma_store_wait(int pending, Site site);
void fence_proxy_async(Site site);

void wgmma_fence(Site site);
void wgmma_commit(Site site);
void wgmma_wait(int pending, Site site);
// wgmma.mma_async m64nNk16 f32 += {bf16,f16}, or m64nNk32 f32 += e4m3 (both
// operands K-major): `a_regs` null reads A through `a_desc`; d holds n/2 floats.
void wgmma(Element element, int n, bool trans_b, float* d, const std::uint32_t* a_regs, std::uint64_t a_desc,
           std::uint64_t b_desc, int scale_d, Site site);

void named_barrier(unsigned id, unsigned thread_count, bool wait, Site site);
bool elect_one(Site site);
void setmaxnreg(bool increase, int registers, Site site);
void stmatrix(bool trans, std::uint32_t address, const std::uint32_t (&r)[4], Site site);
// ld.shared.v4.b32 of one thread: the chunk must be settled (no copy or TMA
// box in flight, another thread's write behind a barrier); recorded as read.
void load_shared_16(std::uint32_t (&r)[4], std::uint32_t address, Site site);
int atomic_add(int* address, int value, Site site);

}  // namespace mla::simt
