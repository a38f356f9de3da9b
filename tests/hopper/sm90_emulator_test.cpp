// The emulator's sm_90 checks that the probes do not reach, each on a small
// kernel written for the purpose: the hazard is reported with its thread (and
// where there is one, its address), and the correct variant runs clean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/sm90_primitives.cuh"
#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"
#include "simt/emulator.hpp"

namespace mla::simt {
namespace {

namespace sm90 = cuda_flash::sm90;

alignas(1024) unsigned char smem[shared_anchor_bytes];

LaunchConfig block_of(unsigned threads, std::size_t alignment = 1024) {
  LaunchConfig config;
  config.kernel = "sm90_test";
  config.block.x = threads;
  config.dynamic_shared_bytes = 8192;
  config.dynamic_shared_symbol = smem;
  config.dynamic_shared_alignment = alignment;
  return config;
}

// The emulator's message, or "" when the kernel ran clean.
std::string failure_of(const LaunchConfig& config, const std::function<void()>& kernel) {
  try {
    launch(config, kernel);
  } catch (const Error& error) {
    std::cout << "[ reported ] " << error.what() << "\n";
    return error.what();
  }
  return "";
}

#define EXPECT_REPORTS(message, needle) EXPECT_NE((message).find(needle), std::string::npos) << "message: " << (message)

// The map of a 64-row operand of 32 bytes per row (one wgmma's k: 16 bf16
// or 32 e4m3) at `base`, loaded by one TMA box as a K-major no-swizzle
// operand: [k / per core row][64 rows][16 bytes].
sm90::TensorMap k_major_tile_map(const void* base, int element_bytes) {
  const int per_core_row = 16 / element_bytes;
  sm90::TensorMapSpec spec;
  spec.base = base;
  spec.rank = 3;
  spec.element_bytes = element_bytes;
  spec.dims[0] = static_cast<std::uint64_t>(per_core_row);
  spec.dims[1] = 64;
  spec.dims[2] = 2;
  spec.strides_bytes[0] = 32;
  spec.strides_bytes[1] = 16;
  spec.box[0] = static_cast<std::uint32_t>(per_core_row);
  spec.box[1] = 64;
  spec.box[2] = 2;
  return sm90::make_tensor_map(spec);
}

// A 64 x 16 bf16 tile (2 KB) loaded by TMA into shared offset 0.
struct Tile {
  std::vector<std::uint16_t> values = std::vector<std::uint16_t>(64 * 16, 0x3f80);  // 1.0
  sm90::TensorMap map = k_major_tile_map(values.data(), 2);
};

std::uint64_t* barrier() { return reinterpret_cast<std::uint64_t*>(smem + 4096); }

void init_barrier(bool fence = true) {
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(barrier(), 1);
    if (fence) sm90::fence_barrier_init();
  }
  __syncthreads();
}

void load_tile(const Tile& tile) {
  sm90::mbarrier_arrive_expect_tx(barrier(), 2048);
  sm90::tma_load_3d(smem, &tile.map, barrier(), 0, 0, 0);
}

void multiply(float (&d)[32], bool fence = true) {
  const std::uint64_t desc = sm90::make_smem_descriptor(smem, sm90::Swizzle::none, 1024, 128);
  if (fence) sm90::wgmma_fence();
  sm90::wgmma_ss<__nv_bfloat16, 64, false>(d, desc, desc, 0);
  sm90::wgmma_commit_group();
}

TEST(Sm90Emulator, ACleanWgmmaGivesTheProduct) {
  const Tile tile;
  std::vector<float> out(128 * 32, -1.0f);
  const std::string message = failure_of(block_of(128), [&] {
    init_barrier();
    if (threadIdx.x == 0) load_tile(tile);
    sm90::mbarrier_wait_parity(barrier(), 0);
    float d[32];
    multiply(d);
    sm90::wgmma_wait_group<0>();
    for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = d[i];
  });
  EXPECT_EQ(message, "");
  for (const float v : out) ASSERT_EQ(v, 16.0f);  // sum of 16 products of ones
}

// An e4m3 operand of 64 rows x 32 k (one k32 wgmma) from random codes over
// the finite range (NaN excluded), loaded by TMA as a K-major operand without
// swizzle: [k / 16][64 rows][16 bytes], one core matrix row per 16 k.
struct Fp8Tile {
  std::vector<std::uint8_t> codes = std::vector<std::uint8_t>(64 * 32);  // [row][k]
  sm90::TensorMap map;
  explicit Fp8Tile(unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> code(0, 255);
    for (std::uint8_t& c : codes) {
      do c = static_cast<std::uint8_t>(code(rng));
      while ((c & 0x7f) == 0x7f);
    }
    map = k_major_tile_map(codes.data(), 1);
  }
  float at(int row, int k) const { return numeric::fp8_e4m3_to_float(codes[static_cast<std::size_t>(row * 32 + k)]); }
};

// The m64n64 fp32 accumulators written here from the PTX ISA (warp w owns
// rows 16w..16w+15; per 8 columns the mma.m16n8 C layout), apart from the
// emulator's own layout functions: out[thread][register] against the fp64
// product of A (64 x 32) and B^T (B's 64 rows are the columns).
void expect_fp8_product(const std::vector<float>& out, const Fp8Tile& a, const Fp8Tile& b) {
  for (int thread = 0; thread < 128; ++thread) {
    const int warp = thread / 32, lane = thread % 32;
    for (int r = 0; r < 32; ++r) {
      const int row = 16 * warp + lane / 4 + 8 * ((r / 2) % 2), col = 8 * (r / 4) + 2 * (lane % 4) + r % 2;
      double want = 0.0;
      for (int k = 0; k < 32; ++k) want += static_cast<double>(a.at(row, k)) * b.at(col, k);
      ASSERT_NEAR(out[static_cast<std::size_t>(thread * 32 + r)], want, 1e-6 * std::max(1.0, std::abs(want)))
          << "thread " << thread << ", register " << r;
    }
  }
}

void load_fp8_tiles(const Fp8Tile& a, const Fp8Tile& b) {
  sm90::mbarrier_arrive_expect_tx(barrier(), 4096);
  sm90::tma_load_3d(smem, &a.map, barrier(), 0, 0, 0);
  sm90::tma_load_3d(smem + 2048, &b.map, barrier(), 0, 0, 0);
}

// Loads the two tiles, issues one wgmma into d (`issue`) between a fence and
// the wait that retires it, and keeps each thread's accumulators in out.
std::string run_fp8_wgmma(const Fp8Tile& a, const Fp8Tile& b, std::vector<float>& out,
                          const std::function<void(float (&)[32])>& issue) {
  return failure_of(block_of(128), [&] {
    init_barrier();
    if (threadIdx.x == 0) load_fp8_tiles(a, b);
    sm90::mbarrier_wait_parity(barrier(), 0);
    float d[32];
    sm90::wgmma_fence();
    issue(d);
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = d[i];
  });
}

TEST(Sm90Emulator, AnFp8WgmmaGivesTheProductOfItsSharedOperands) {
  const Fp8Tile a(3), b(5);
  std::vector<float> out(128 * 32, -1.0f);
  const std::string message = run_fp8_wgmma(a, b, out, [&](float(&d)[32]) {
    const std::uint64_t a_desc = sm90::make_smem_descriptor(smem, sm90::Swizzle::none, 1024, 128);
    const std::uint64_t b_desc = sm90::make_smem_descriptor(smem + 2048, sm90::Swizzle::none, 1024, 128);
    sm90::wgmma_ss<__nv_fp8_e4m3, 64, false>(d, a_desc, b_desc, 0);
  });
  ASSERT_EQ(message, "");
  expect_fp8_product(out, a, b);
}

// A from registers: value v of a thread is byte v % 4 of register v / 4, at
// row 16 warp + lane / 4 (+8 for values 4-7 and 12-15) and column
// 4 (lane % 4) + v % 4 (+16 for values 8-15), the PTX ISA's m64k32 8-bit A fragment.
TEST(Sm90Emulator, AnFp8WgmmaTakesARegisterFragment) {
  const Fp8Tile a(7), b(9);
  std::vector<float> out(128 * 32, -1.0f);
  const std::string message = run_fp8_wgmma(a, b, out, [&](float(&d)[32]) {
    const int thread = static_cast<int>(threadIdx.x), warp = thread / 32, lane = thread % 32;
    std::uint32_t regs[4] = {};
    for (int v = 0; v < 16; ++v) {
      const int row = 16 * warp + lane / 4 + 8 * ((v / 4) % 2), k = 4 * (lane % 4) + v % 4 + 16 * (v / 8);
      regs[v / 4] |= std::uint32_t{a.codes[static_cast<std::size_t>(row * 32 + k)]} << (8 * (v % 4));
    }
    const std::uint64_t b_desc = sm90::make_smem_descriptor(smem + 2048, sm90::Swizzle::none, 1024, 128);
    sm90::wgmma_rs<__nv_fp8_e4m3, 64, false>(d, regs, b_desc, 0);
  });
  ASSERT_EQ(message, "");
  expect_fp8_product(out, a, b);
}

TEST(Sm90Emulator, AnMnMajorFp8OperandIsRefused) {
  const Fp8Tile a(11), b(13);
  std::vector<float> out(128 * 32);
  const std::string message = run_fp8_wgmma(a, b, out, [&](float(&d)[32]) {
    const std::uint64_t desc = sm90::make_smem_descriptor(smem, sm90::Swizzle::none, 1024, 128);
    // The wrappers refuse TransB at compile time; the instruction itself too.
    wgmma(Element::e4m3, 64, true, d, nullptr, desc, desc, 0, {__FILE__, __LINE__});
  });
  EXPECT_REPORTS(message, "8-bit operands are K-major only");
}

TEST(Sm90Emulator, AWgmmaWithoutFenceIsReported) {
  const Tile tile;
  const std::string message = failure_of(block_of(128), [&] {
    init_barrier();
    if (threadIdx.x == 0) load_tile(tile);
    sm90::mbarrier_wait_parity(barrier(), 0);
    float d[32];
    multiply(d, false);
    sm90::wgmma_wait_group<0>();
  });
  EXPECT_REPORTS(message, "no wgmma.fence");
  EXPECT_REPORTS(message, "thread 0");
}

TEST(Sm90Emulator, ABarrierTheAsyncProxyMayNotSeeIsReported) {
  const Tile tile;
  const std::string message = failure_of(block_of(128), [&] {
    init_barrier(false);
    if (threadIdx.x == 0) load_tile(tile);
  });
  EXPECT_REPORTS(message, "without fence.mbarrier_init");
  EXPECT_REPORTS(message, "shared address 0x1400");
}

TEST(Sm90Emulator, ABoxReadByAThreadThatNeverWaitedIsReported) {
  // Warpgroup 0 loads and waits; warpgroup 1 multiplies without waiting.
  const Tile tile;
  const std::string message = failure_of(block_of(256), [&] {
    init_barrier();
    if (threadIdx.x < 128) {
      if (threadIdx.x == 0) load_tile(tile);
      sm90::mbarrier_wait_parity(barrier(), 0);
      return;
    }
    float d[32];
    multiply(d);
    sm90::wgmma_wait_group<0>();
  });
  EXPECT_REPORTS(message, "never waited for");
  EXPECT_REPORTS(message, "thread 128");
}

TEST(Sm90Emulator, WgmmaOrTmaStillInFlightAtExitIsReported) {
  const Tile tile;
  const std::string wgmma = failure_of(block_of(128), [&] {
    init_barrier();
    if (threadIdx.x == 0) load_tile(tile);
    sm90::mbarrier_wait_parity(barrier(), 0);
    float d[32];
    multiply(d);
  });
  EXPECT_REPORTS(wgmma, "exits with wgmma operations in flight");
  const std::string tma = failure_of(block_of(128), [&] {
    init_barrier();
    if (threadIdx.x == 0) load_tile(tile);
  });
  EXPECT_REPORTS(tma, "still completing on this mbarrier");
}

TEST(Sm90Emulator, ATmaStoreSourceOverwrittenBeforeItsWaitIsReported) {
  const Tile tile;
  std::vector<std::uint16_t> sink(64 * 16);
  Tile out;
  out.values = sink;
  sm90::TensorMapSpec spec;
  spec.base = sink.data();
  spec.rank = 2;
  spec.element_bytes = 2;
  spec.dims[0] = 8;
  spec.dims[1] = 8;
  spec.strides_bytes[0] = 16;
  spec.box[0] = 8;
  spec.box[1] = 8;
  const sm90::TensorMap store_map = sm90::make_tensor_map(spec);
  const std::string message = failure_of(block_of(32), [&] {
    const std::uint32_t r[4] = {0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};
    const std::uint32_t row = sm90::shared_address(smem + (threadIdx.x / 8) * 128 + (threadIdx.x % 8) * 16);
    sm90::stmatrix_x4(row, r);
    sm90::fence_proxy_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
      sm90::tma_store_2d(&store_map, smem, 0, 0);
      sm90::tma_store_commit_group();
    }
    __syncthreads();
    sm90::stmatrix_x4(row, r);  // before the store's wait_group.read
    if (threadIdx.x == 0) sm90::tma_store_wait<0>();
  });
  EXPECT_REPORTS(message, "a TMA store of thread 0 still reads");
  EXPECT_REPORTS(message, "shared address 0x400");
}

TEST(Sm90Emulator, NamedBarriersCheckIdsAndCounts) {
  const std::string mismatch =
      failure_of(block_of(128), [&] { sm90::named_barrier_sync(1, threadIdx.x < 64 ? 128 : 96); });
  EXPECT_REPORTS(mismatch, "arrived with count 128");
  EXPECT_REPORTS(failure_of(block_of(64), [&] { sm90::named_barrier_sync(0, 64); }), "ids 1..15");
  const std::string never = failure_of(block_of(64), [&] {
    if (threadIdx.x < 32) sm90::named_barrier_sync(3, 64);
  });
  EXPECT_REPORTS(never, "waits at bar.sync 3");
  EXPECT_REPORTS(never, "32 of 64 threads arrived");
  // Producer arrives, consumer syncs: a clean handoff.
  EXPECT_EQ(failure_of(block_of(64),
                       [&] {
                         if (threadIdx.x < 32) {
                           sm90::named_barrier_arrive(2, 64);
                         } else {
                           sm90::named_barrier_sync(2, 64);
                         }
                       }),
            "");
}

TEST(Sm90Emulator, SetmaxnregChecksCountsAndTheRegisterFile) {
  EXPECT_REPORTS(failure_of(block_of(128), [&] { sm90::setmaxnreg_increase<250>(); }), "multiple of 8");
  const std::string total = failure_of(block_of(384), [&] {
    if (threadIdx.x < 128) {
      sm90::setmaxnreg_decrease<40>();
    } else {
      sm90::setmaxnreg_increase<240>();
    }
  });
  EXPECT_REPORTS(total, "more than the multiprocessor's 65536");
  LaunchConfig declared = block_of(256);
  declared.registers_per_thread = 128;
  EXPECT_REPORTS(failure_of(declared, [&] { sm90::setmaxnreg_increase<64>(); }), "while it holds 128");
  const std::string split = failure_of(block_of(128), [&] {
    if (threadIdx.x < 64) {
      sm90::setmaxnreg_increase<64>();
    } else {
      sm90::setmaxnreg_decrease<64>();
    }
  });
  EXPECT_REPORTS(split, "warpgroup 0 diverges");
}

TEST(Sm90Emulator, ElectionIsNotAlwaysLaneZero) {
  std::vector<int> forward(32), reverse(32);
  EXPECT_EQ(failure_of(block_of(32), [&] { forward[threadIdx.x] = sm90::elect_one_sync() ? 1 : 0; }), "");
  set_schedule(Schedule::reverse);
  EXPECT_EQ(failure_of(block_of(32), [&] { reverse[threadIdx.x] = sm90::elect_one_sync() ? 1 : 0; }), "");
  set_schedule(Schedule::forward);
  EXPECT_EQ(forward[0], 1);
  EXPECT_EQ(reverse[31], 1);
  int elected = 0;
  for (int lane = 0; lane < 32; ++lane) elected += forward[lane] + reverse[lane];
  EXPECT_EQ(elected, 2);
}

TEST(Sm90Emulator, SharedAlignmentIsExactlyWhatTheLaunchDeclares) {
  std::uint32_t address = 0;
  EXPECT_EQ(failure_of(block_of(32, 256), [&] { address = sm90::shared_address(smem); }), "");
  EXPECT_EQ(address, 256u);
  try {
    launch(block_of(32, 100), [] {});
    ADD_FAILURE() << "an alignment of 100 was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
  }
  EXPECT_REPORTS(failure_of(block_of(32), [&] { (void)sm90::shared_address(smem + 9000); }),
                 "outside the kernel's extern __shared__ array");
}

TEST(Sm90Emulator, TensorMapSpecsAreCheckedFieldByField) {
  std::vector<std::uint16_t> data(256);
  sm90::TensorMapSpec spec;
  spec.base = data.data();
  spec.rank = 2;
  spec.element_bytes = 2;
  spec.dims[0] = 16;
  spec.dims[1] = 16;
  spec.strides_bytes[0] = 32;
  spec.box[0] = 16;
  spec.box[1] = 8;
  spec.swizzle = sm90::Swizzle::bytes32;
  EXPECT_NO_THROW((void)sm90::make_tensor_map(spec));
  const auto refused = [&](sm90::TensorMapSpec bad, const std::string& field) {
    try {
      (void)sm90::make_tensor_map(bad);
      ADD_FAILURE() << field << " was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(field), std::string::npos) << error.what();
    }
  };
  sm90::TensorMapSpec bad = spec;
  bad.strides_bytes[0] = 40;
  refused(bad, "strides_bytes[0]");
  bad = spec;
  bad.box[1] = 300;
  refused(bad, "box[1]");
  bad = spec;
  bad.box[0] = 32;
  refused(bad, "swizzle span");
  bad = spec;
  bad.rank = 6;
  refused(bad, "rank 6");
  bad = spec;
  bad.base = reinterpret_cast<const unsigned char*>(data.data()) + 8;
  refused(bad, "16-byte aligned");
}

}  // namespace
}  // namespace mla::simt
