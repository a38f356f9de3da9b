// Probe kernels for the sm_90a primitives: each exercises a few instructions
// with a result the host can compute exactly from the PTX ISA's definitions.
// The same source runs on a GPU (sm90_probe_main.cu, whose output becomes
// golden data) and under the emulator (sm90_probe_test.cpp), where the
// `defect` switches also break a probe on purpose.
#pragma once

#include <cstdint>

#include "cuda/sm80_primitives.cuh"
#include "cuda/sm90_primitives.cuh"

namespace mla::sm90_probes {

enum class Probe : int { wgmma_ss, wgmma_rs, tma_box, stmatrix, pingpong };

enum class Defect : int {
  none,
  wrong_parity,                    // consumers wait on parity 1 of a fresh mbarrier
  expect_tx_extra_box,             // expect_tx announces one box more than is loaded
  expect_tx_short_box,             // expect_tx announces one box less than is loaded
  missing_proxy_fence,             // stmatrix, barrier, TMA store without fence.proxy.async
  accumulators_before_wait,        // accumulators read (and stored) before wgmma.wait_group
  accumulators_written_in_flight,  // accumulators written before wgmma.wait_group
  swizzle_mismatch,                // B descriptor's swizzle differs from its tensor map's
  over_arrival,                    // a second arrival on a count-1 mbarrier
  stale_phase,                     // a second wait on the same phase
  overwrite_in_flight_operand,     // a TMA load into A while a wgmma still reads it
  spin_forever,                    // try_wait on a phase nothing will complete
  use_before_init,                 // an mbarrier used without mbarrier.init
};

// Shared memory of every probe: A tile, B tile (both on 1024-byte swizzle
// repeats), two mbarriers.
inline constexpr unsigned a_tile = 0;
inline constexpr unsigned b_tile = 8192;
inline constexpr unsigned barrier_offset = 16384;
inline constexpr unsigned shared_bytes = 16384 + 64;

struct Params {
  Probe probe = Probe::wgmma_ss;
  Defect defect = Defect::none;
  int swizzle_a = 0;  // descriptor encodings (cuda_flash::sm90::Swizzle)
  int swizzle_b = 0;
  int b_mn_major = 0;
  int fp8 = 0;  // e4m3 operands (k32 wgmma, K-major only) instead of bf16 (k16)
  int k_blocks = 1;
  unsigned lbo_a = 0, sbo_a = 0, lbo_b = 0, sbo_b = 0;
  unsigned a_step = 0, b_step = 0;  // descriptor start advance per k block (16 bf16, 32 e4m3), bytes
  int a_rank = 2, b_rank = 2;
  unsigned tx_bytes = 0;
  unsigned box_bytes_a = 0;
  int c0 = 0, c1 = 0;                     // TMA box coordinates (tma_box)
  int rounds = 0;                         // pingpong
  const std::uint32_t* a_frag = nullptr;  // [k_blocks][128][4] (wgmma_rs, either type), [64][4] (stmatrix)
  void* out = nullptr;
  int* counter = nullptr;
};

namespace detail {

namespace sm90 = cuda_flash::sm90;

__device__ inline void tma_load(void* dst, const sm90::TensorMap* map, std::uint64_t* bar, int rank) {
  if (rank == 2) {
    sm90::tma_load_2d(dst, map, bar, 0, 0);
  } else {
    sm90::tma_load_3d(dst, map, bar, 0, 0, 0);
  }
}

// One k block of wgmma m64n64 on operands of type T (bf16: k16, e4m3: k32).
template <class T, bool TransB>
__device__ inline void wgmma_block(float (&d)[32], const Params& p, unsigned char* smem, int j, int tid) {
  const auto swizzle_b = static_cast<sm90::Swizzle>(p.defect == Defect::swizzle_mismatch ? 2 : p.swizzle_b);
  const std::uint64_t b_desc =
      sm90::make_smem_descriptor(smem + b_tile + static_cast<unsigned>(j) * p.b_step, swizzle_b, p.lbo_b, p.sbo_b);
  if (p.probe == Probe::wgmma_rs) {
    const std::uint32_t* f = p.a_frag + (j * 128 + tid) * 4;
    const std::uint32_t a[4] = {f[0], f[1], f[2], f[3]};
    sm90::wgmma_rs<T, 64, TransB>(d, a, b_desc, j > 0 ? 1 : 0);
  } else {
    const std::uint64_t a_desc = sm90::make_smem_descriptor(smem + a_tile + static_cast<unsigned>(j) * p.a_step,
                                                            static_cast<sm90::Swizzle>(p.swizzle_a), p.lbo_a, p.sbo_a);
    sm90::wgmma_ss<T, 64, TransB>(d, a_desc, b_desc, j > 0 ? 1 : 0);
  }
}

// One warpgroup: thread 0 loads A and B with TMA, every thread waits on the
// mbarrier, the warpgroup multiplies (k_blocks wgmmas) and writes its
// accumulators in fragment order: out[thread * 32 + i].
__device__ inline void wgmma_probe(const sm90::TensorMap& map_a, const sm90::TensorMap& map_b, const Params& p,
                                   unsigned char* smem, int tid) {
  auto* bar = reinterpret_cast<std::uint64_t*>(smem + barrier_offset);
  if (tid == 0 && p.defect != Defect::use_before_init) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    unsigned tx = p.tx_bytes;
    if (p.defect == Defect::expect_tx_extra_box) tx += p.box_bytes_a;
    if (p.defect == Defect::expect_tx_short_box) tx -= p.box_bytes_a;
    sm90::mbarrier_arrive_expect_tx(bar, tx);
    if (p.probe == Probe::wgmma_ss) tma_load(smem + a_tile, &map_a, bar, p.a_rank);
    tma_load(smem + b_tile, &map_b, bar, p.b_rank);
    if (p.defect == Defect::over_arrival) sm90::mbarrier_arrive(bar);
  }
  sm90::mbarrier_wait_parity(bar, p.defect == Defect::wrong_parity ? 1u : 0u);
  if (p.defect == Defect::stale_phase) sm90::mbarrier_wait_parity(bar, 0);
  float d[32] = {};
  sm90::wgmma_fence();
  for (int j = 0; j < p.k_blocks; ++j) {
    if (p.fp8 != 0) {
      wgmma_block<__nv_fp8_e4m3, false>(d, p, smem, j, tid);  // 8-bit wgmma takes K-major B only
    } else if (p.b_mn_major != 0) {
      wgmma_block<__nv_bfloat16, true>(d, p, smem, j, tid);
    } else {
      wgmma_block<__nv_bfloat16, false>(d, p, smem, j, tid);
    }
  }
  sm90::wgmma_commit_group();
  if (p.defect == Defect::overwrite_in_flight_operand && tid == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, p.box_bytes_a);
    tma_load(smem + a_tile, &map_a, bar, p.a_rank);
  }
  if (p.defect == Defect::accumulators_before_wait) {
    const std::uint32_t r[4] = {cuda_flash::sm80::Pack2<__nv_bfloat16>{}(d[0], d[1]), 0, 0, 0};
    sm90::stmatrix_x4(sm90::shared_address(smem + 12288 + (tid % 32) * 16 + (tid / 32) * 512), r);
  }
  if (p.defect == Defect::accumulators_written_in_flight) d[3] = 1.0f;
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(d);
  auto* out = static_cast<float*>(p.out);
  for (int i = 0; i < 32; ++i) out[tid * 32 + i] = d[i];
}

// Thread 0 loads a box that reaches past the tensor's end (zero fill), then
// stores it whole to `map_dump` (box-sized output) and back over the source
// coordinates into `map_back` (out-of-bounds elements dropped).
__device__ inline void tma_box_probe(const sm90::TensorMap& map_src, const sm90::TensorMap& map_dump,
                                     const sm90::TensorMap& map_back, const Params& p, unsigned char* smem, int tid) {
  auto* bar = reinterpret_cast<std::uint64_t*>(smem + barrier_offset);
  if (tid == 0) {
    sm90::mbarrier_init(bar, 1);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    sm90::mbarrier_arrive_expect_tx(bar, p.tx_bytes);
    sm90::tma_load_2d(smem + a_tile, &map_src, bar, p.c0, p.c1);
    sm90::mbarrier_wait_parity(bar, 0);
    sm90::tma_store_2d(&map_dump, smem + a_tile, 0, 0);
    sm90::tma_store_2d(&map_back, smem + a_tile, p.c0, p.c1);
    sm90::tma_store_commit_group();
    sm90::tma_store_wait<0>();
  }
}

// Warp 0 stores four 8x8 matrices with stmatrix, warp 1 the same registers
// with stmatrix.trans; thread 0 stores the 1024 bytes with TMA.
__device__ inline void stmatrix_probe(const sm90::TensorMap& map_dump, const Params& p, unsigned char* smem, int tid) {
  const int warp = tid / 32, lane = tid % 32;
  if (warp < 2) {
    const std::uint32_t* f = p.a_frag + lane * 4;
    const std::uint32_t r[4] = {f[0], f[1], f[2], f[3]};
    const std::uint32_t row = sm90::shared_address(smem + a_tile + warp * 512 + (lane / 8) * 128 + (lane % 8) * 16);
    if (warp == 0) {
      sm90::stmatrix_x4(row, r);
    } else {
      sm90::stmatrix_x4_trans(row, r);
    }
    if (p.defect != Defect::missing_proxy_fence) sm90::fence_proxy_async_shared();
  }
  __syncthreads();
  if (tid == 0) {
    sm90::tma_store_2d(&map_dump, smem + a_tile, 0, 0);
    sm90::tma_store_commit_group();
    sm90::tma_store_wait<0>();
  }
}

// Two warpgroups hand a turn back and forth `rounds` times through two
// mbarriers of 128 arrivals; one elected lane per turn takes a ticket from a
// global counter: out[turn] = turn when the order holds.
__device__ inline void pingpong_probe(const Params& p, unsigned char* smem, int tid) {
  auto* ping = reinterpret_cast<std::uint64_t*>(smem + barrier_offset);
  auto* pong = ping + 1;
  if (tid == 0) {
    sm90::mbarrier_init(ping, 128);
    sm90::mbarrier_init(pong, 128);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  auto* out = static_cast<int*>(p.out);
  const int group = tid / 128;
  if (group == 0) {
    sm90::setmaxnreg_decrease<40>();
    for (int r = 0; r < p.rounds; ++r) {
      if (r > 0) sm90::mbarrier_wait_parity(pong, static_cast<unsigned>(r - 1) & 1u);
      if (tid < 32 && sm90::elect_one_sync()) out[2 * r] = sm90::atomic_add_global(p.counter, 1);
      sm90::mbarrier_arrive(ping);
    }
    sm90::mbarrier_wait_parity(pong, static_cast<unsigned>(p.rounds - 1) & 1u);
  } else {
    sm90::setmaxnreg_increase<232>();
    for (int r = 0; r < p.rounds; ++r) {
      if (p.defect == Defect::spin_forever) {
        while (!sm90::mbarrier_try_wait_parity(pong, 0)) {
        }
      }
      while (!sm90::mbarrier_try_wait_parity(ping, static_cast<unsigned>(r) & 1u)) {
      }
      if (tid < 160 && sm90::elect_one_sync()) out[2 * r + 1] = sm90::atomic_add_global(p.counter, 1);
      sm90::named_barrier_sync(1, 128);  // the ticket is taken before the turn passes
      sm90::mbarrier_arrive(pong);
    }
  }
}

}  // namespace detail

// The probe kernel: 128 threads (256 for pingpong), shared_bytes of dynamic
// shared memory aligned to 1024 bytes.
__global__ void __launch_bounds__(256, 1)
    sm90_probe(const __grid_constant__ cuda_flash::sm90::TensorMap map_a,
               const __grid_constant__ cuda_flash::sm90::TensorMap map_b,
               const __grid_constant__ cuda_flash::sm90::TensorMap map_c, const Params p) {
  extern __shared__ __align__(1024) unsigned char probe_shared[];
  const int tid = static_cast<int>(threadIdx.x);
  switch (p.probe) {
    case Probe::wgmma_ss:
    case Probe::wgmma_rs:
      detail::wgmma_probe(map_a, map_b, p, probe_shared, tid);
      break;
    case Probe::tma_box:
      detail::tma_box_probe(map_a, map_b, map_c, p, probe_shared, tid);
      break;
    case Probe::stmatrix:
      detail::stmatrix_probe(map_b, p, probe_shared, tid);
      break;
    case Probe::pingpong:
      detail::pingpong_probe(p, probe_shared, tid);
      break;
  }
}

}  // namespace mla::sm90_probes
