// The GPU emulator on small kernels: the instructions compute what the PTX
// and CDNA tables say, correct kernels run clean in both schedules, and each
// kind of defect it promises to catch is reported with thread and place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"
#include "simt/sm80.hpp"

namespace mla::simt {
namespace {

namespace sm80 = cuda_flash::sm80;

// Stands for the kernel's extern __shared__ array.
alignas(128) unsigned char shared_anchor[16];

LaunchConfig one_block(unsigned threads, std::size_t shared_bytes = 512, int warp = 32) {
  LaunchConfig config;
  config.kernel = "test_kernel";
  config.block.x = threads;
  config.warp_size = warp;
  config.dynamic_shared_bytes = shared_bytes;
  config.dynamic_shared_symbol = shared_anchor;
  return config;
}

// The emulator's message for `kernel`, or "" when it ran clean.
std::string failure_of(const LaunchConfig& config, const std::function<void()>& kernel) {
  try {
    launch(config, kernel);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::device) << error.what();
    return error.what();
  }
  return "";
}

#define EXPECT_FAILS_WITH(message, needle) \
  EXPECT_NE((message).find(needle), std::string::npos) << "message: " << (message)

std::string schedule_name(const ::testing::TestParamInfo<Schedule>& param) {
  return param.param == Schedule::forward ? "forward" : "reverse";
}

class Schedules : public ::testing::TestWithParam<Schedule> {
 protected:
  void SetUp() override { set_schedule(GetParam()); }
  void TearDown() override { set_schedule(Schedule::forward); }
};

// 32 rows of 16 bytes: row r holds the 8 values 8r .. 8r+7.
std::vector<std::uint16_t> rows_of_indices() {
  std::vector<std::uint16_t> data(32 * 8);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint16_t>(i);
  return data;
}

// Each lane copies row `lane` into shared chunk `lane`, then the warp reads
// the rows back with ldmatrix.x4 (lane l gives the address of row (l + shift) % 32).
void copy_then_ldmatrix(const std::uint16_t* global, bool wait, bool barrier, bool trans, int shift,
                        std::vector<std::uint32_t>& regs) {
  const int lane = static_cast<int>(threadIdx.x);
  const std::uint32_t base = sm80::shared_address(shared_anchor);
  sm80::cp_async_16(base + static_cast<std::uint32_t>(lane * 16), global + lane * 8, true);
  sm80::cp_async_commit();
  if (wait) sm80::cp_async_wait<0>();
  if (barrier) __syncthreads();
  std::uint32_t r[4];
  const std::uint32_t row = base + static_cast<std::uint32_t>(((lane + shift) % 32) * 16);
  if (trans) {
    sm80::ldmatrix_x4_trans(r, row);
  } else {
    sm80::ldmatrix_x4(r, row);
  }
  for (int m = 0; m < 4; ++m) regs[static_cast<std::size_t>(lane * 4 + m)] = r[m];
  // Every copy has landed: nothing may be left in flight at exit.
  sm80::cp_async_wait<0>();
}

TEST_P(Schedules, LdmatrixDeliversThePtxFragments) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  for (bool trans : {false, true}) {
    std::vector<std::uint32_t> regs(32 * 4);
    ASSERT_EQ(failure_of(one_block(32), [&] { copy_then_ldmatrix(global.data(), true, true, trans, 0, regs); }), "");
    // Matrix m is rows 8m .. 8m+7; element (row, col) holds 64m + 8 row + col.
    for (int lane = 0; lane < 32; ++lane) {
      for (int m = 0; m < 4; ++m) {
        const int g = lane / 4, c = 2 * (lane % 4);
        const auto at = [&](int row, int col) { return static_cast<std::uint32_t>(64 * m + 8 * row + col); };
        const std::uint32_t want = trans ? at(c, g) | (at(c + 1, g) << 16) : at(g, c) | (at(g, c + 1) << 16);
        EXPECT_EQ(regs[static_cast<std::size_t>(lane * 4 + m)], want) << "lane " << lane << " matrix " << m;
      }
    }
  }
}

TEST_P(Schedules, ReadingAnotherThreadsCopyWithoutABarrierIsReported) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  std::vector<std::uint32_t> regs(32 * 4);
  const std::string message =
      failure_of(one_block(32), [&] { copy_then_ldmatrix(global.data(), true, false, false, 1, regs); });
  // Whichever lane reads first sees a copy in flight or a write with no barrier.
  EXPECT_TRUE(message.find("with no __syncthreads in between") != std::string::npos ||
              message.find("in flight") != std::string::npos)
      << message;
  EXPECT_FAILS_WITH(message, "emulator_test.cpp:");
}

TEST_P(Schedules, ReadingBeforeTheWaitIsReported) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  std::vector<std::uint32_t> regs(32 * 4);
  const std::string message =
      failure_of(one_block(32), [&] { copy_then_ldmatrix(global.data(), false, true, false, 0, regs); });
  EXPECT_FAILS_WITH(message, "before the cp.async.wait_group that lands its own copy");
  EXPECT_FAILS_WITH(message, "thread 0");
}

TEST(Emulator, CopiesInFlightAtExitAreReported) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  const std::string message = failure_of(one_block(32), [&] {
    sm80::cp_async_16(sm80::shared_address(shared_anchor) + static_cast<std::uint32_t>(threadIdx.x * 16), global.data(),
                      true);
    sm80::cp_async_commit();
  });
  EXPECT_FAILS_WITH(message, "still in flight");
}

TEST(Emulator, TwoCopiesInFlightToOneChunkAreReported) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  const std::string message = failure_of(one_block(32), [&] {
    sm80::cp_async_16(sm80::shared_address(shared_anchor), global.data(), true);
    sm80::cp_async_commit();
    __syncthreads();  // every thread's copy is issued before any wait
    sm80::cp_async_wait<0>();
  });
  EXPECT_FAILS_WITH(message, "to the same chunk is still in flight");
}

TEST(Emulator, OverwritingAChunkOthersReadInTheSameIntervalIsReported) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  const std::string message = failure_of(one_block(32), [&] {
    const int lane = static_cast<int>(threadIdx.x);
    sm80::cp_async_16(sm80::shared_address(shared_anchor) + static_cast<std::uint32_t>(lane * 16),
                      global.data() + lane * 8, true);
    sm80::cp_async_commit();
    sm80::cp_async_wait<0>();
    __syncthreads();
    std::uint32_t r[4];
    sm80::ldmatrix_x4(r, sm80::shared_address(shared_anchor) + static_cast<std::uint32_t>(lane * 16));
    // Refill the next row without a barrier: lane l + 1 read it just now.
    sm80::cp_async_16(sm80::shared_address(shared_anchor) + static_cast<std::uint32_t>(((lane + 1) % 32) * 16),
                      global.data(), true);
    sm80::cp_async_commit();
    sm80::cp_async_wait<0>();
  });
  EXPECT_FAILS_WITH(message, "overwrites a chunk thread");
}

TEST(Emulator, SharedAndGlobalAddressesOutOfRangeAreReported) {
  const std::vector<std::uint16_t> global = rows_of_indices();
  const std::string shared = failure_of(one_block(32, 256), [&] {
    sm80::cp_async_16(sm80::shared_address(shared_anchor) + static_cast<std::uint32_t>(256 + threadIdx.x * 16),
                      global.data(), false);
    sm80::cp_async_commit();
    sm80::cp_async_wait<0>();
  });
  EXPECT_FAILS_WITH(shared, "outside the block's 256 bytes of dynamic shared memory");

  LaunchConfig config = one_block(32);
  config.global_reads = {MemoryRange{global.data(), 31 * 16, "rows"}};  // the last row is not an input
  const std::string outside = failure_of(config, [&] {
    const int lane = static_cast<int>(threadIdx.x);
    sm80::cp_async_16(sm80::shared_address(shared_anchor) + static_cast<std::uint32_t>(lane * 16),
                      global.data() + lane * 8, true);
    sm80::cp_async_commit();
    sm80::cp_async_wait<0>();
  });
  EXPECT_FAILS_WITH(outside, "outside every input of the launch (rows)");
  EXPECT_FAILS_WITH(outside, "thread 31");
}

TEST(Emulator, BarrierMisuseIsReported) {
  const std::string split = failure_of(one_block(64), [] {
    if (threadIdx.x < 32) {
      __syncthreads();
    } else {
      __syncthreads();
    }
  });
  EXPECT_FAILS_WITH(split, "threads at different barriers");

  const std::string exited = failure_of(one_block(64), [] {
    if (threadIdx.x == 3) return;
    __syncthreads();
  });
  EXPECT_FAILS_WITH(exited, "thread 3 exited while thread");
}

TEST(Emulator, WarpDivergenceAndDeadlockAreReported) {
  const std::string diverged = failure_of(one_block(32), [] {
    float x = 1.0f;
    if (threadIdx.x < 16) {
      x = __shfl_xor_sync(0xffffffffu, x, 1);
    } else {
      x = __shfl_xor_sync(0xffffffffu, x, 1);
    }
    (void)x;
  });
  EXPECT_FAILS_WITH(diverged, "warp 0 diverges");

  const std::string deadlock = failure_of(one_block(32), [] {
    if (threadIdx.x == 0) {
      (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
    } else {
      __syncthreads();
    }
  });
  EXPECT_FAILS_WITH(deadlock, "warp 0 deadlocks: lane 0 waits at shfl_xor");

  const std::string missing = failure_of(one_block(32), [] {
    if (threadIdx.x == 7) return;
    (void)__shfl_xor_sync(0xffffffffu, 1.0f, 1);
  });
  EXPECT_FAILS_WITH(missing, "lane 7 of warp 0 has exited");
}

TEST_P(Schedules, ShuffleXorExchangesWithinWidth) {
  std::vector<float> got(64);
  ASSERT_EQ(failure_of(one_block(64, 0, 64),
                       [&] {
                         const unsigned lane = threadIdx.x;
                         // A wave64 shuffle: the mask names all 64 lanes.
                         got[lane] = static_cast<float>(shfl_xor(lane, 33, 64, ~0ull, {__FILE__, __LINE__}));
                       }),
            "");
  for (unsigned lane = 0; lane < 64; ++lane) EXPECT_EQ(got[lane], static_cast<float>(lane ^ 33u)) << lane;
  // Width 16: a source in another segment leaves the lane its own value.
  ASSERT_EQ(failure_of(one_block(32),
                       [&] {
                         const unsigned lane = threadIdx.x;
                         got[lane] = __shfl_xor_sync(0xffffffffu, static_cast<float>(lane), 16, 16);
                       }),
            "");
  for (unsigned lane = 0; lane < 32; ++lane) EXPECT_EQ(got[lane], static_cast<float>(lane)) << lane;
}

std::uint16_t bf16(float value) { return numeric::float_to_bf16(value); }

TEST_P(Schedules, MmaComputesTheProductOfThePtxFragments) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  float a[16][16], b[16][8], c[16][8];
  for (auto& row : a)
    for (float& x : row) x = numeric::bf16_to_float(bf16(dist(rng)));
  for (auto& row : b)
    for (float& x : row) x = numeric::bf16_to_float(bf16(dist(rng)));
  for (auto& row : c)
    for (float& x : row) x = dist(rng);
  float d[16][8] = {};
  ASSERT_EQ(failure_of(one_block(32),
                       [&] {
                         const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
                         const auto two = [](float lo, float hi) {
                           return static_cast<std::uint32_t>(bf16(lo)) | (static_cast<std::uint32_t>(bf16(hi)) << 16);
                         };
                         const std::uint32_t fa[4] = {
                             two(a[g][2 * t], a[g][2 * t + 1]), two(a[g + 8][2 * t], a[g + 8][2 * t + 1]),
                             two(a[g][2 * t + 8], a[g][2 * t + 9]), two(a[g + 8][2 * t + 8], a[g + 8][2 * t + 9])};
                         float acc[4] = {c[g][2 * t], c[g][2 * t + 1], c[g + 8][2 * t], c[g + 8][2 * t + 1]};
                         sm80::mma_16816<__nv_bfloat16>(acc, fa, two(b[2 * t][g], b[2 * t + 1][g]),
                                                        two(b[2 * t + 8][g], b[2 * t + 9][g]));
                         d[g][2 * t] = acc[0];
                         d[g][2 * t + 1] = acc[1];
                         d[g + 8][2 * t] = acc[2];
                         d[g + 8][2 * t + 1] = acc[3];
                       }),
            "");
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double want = c[i][j];
      for (int k = 0; k < 16; ++k) want += static_cast<double>(a[i][k]) * b[k][j];
      EXPECT_NEAR(d[i][j], want, 1e-5) << i << "," << j;
    }
  }
}

// The NaN codes of OCP's e4m3fn (0x7f, 0xff) and of CDNA3's FNUZ e4m3 (0x80).
bool ocp_e4m3_nan(std::uint8_t c) { return (c & 0x7f) == 0x7f; }
bool fnuz_e4m3_nan(std::uint8_t c) { return c == 0x80; }

// Random 8-bit float codes over the whole finite range: subnormals, the
// largest value and the zeros included, the encoding's NaN codes excluded.
std::uint8_t random_code(std::mt19937& rng, bool (*is_nan)(std::uint8_t)) {
  std::uniform_int_distribution<int> code(0, 255);
  for (;;) {
    const auto c = static_cast<std::uint8_t>(code(rng));
    if (!is_nan(c)) return c;
  }
}

std::uint8_t random_e4m3(std::mt19937& rng) { return random_code(rng, ocp_e4m3_nan); }

// The m16n8k32 .e4m3 fragments written here from the PTX ISA's tables, apart
// from the emulator's (simt/sm80_layout.hpp): A row groupID (+8 for bytes
// 4-7 of each 8), column 4 * threadID_in_group + byte (+16 for registers 2
// and 3); B k = 4 * threadID_in_group + byte (+16 for register 1), column groupID.
struct Fp8Fragments {
  std::uint32_t a[4];
  std::uint32_t b[2];
};

Fp8Fragments fp8_fragments(const std::uint8_t (&a)[16][32], const std::uint8_t (&b)[32][8], int lane) {
  const int g = lane / 4, t = lane % 4;
  Fp8Fragments f{};
  for (int r = 0; r < 4; ++r) {
    const int row = g + 8 * (r % 2), col = 4 * t + 16 * (r / 2);
    for (int byte = 0; byte < 4; ++byte) f.a[r] |= std::uint32_t{a[row][col + byte]} << (8 * byte);
  }
  for (int r = 0; r < 2; ++r) {
    for (int byte = 0; byte < 4; ++byte) f.b[r] |= std::uint32_t{b[4 * t + 16 * r + byte][g]} << (8 * byte);
  }
  return f;
}

// Runs one warp's m16n8k32 e4m3 product of a and b onto c, into d [16][8].
std::string run_fp8_mma(const std::uint8_t (&a)[16][32], const std::uint8_t (&b)[32][8], const float (&c)[16][8],
                        float (&d)[16][8]) {
  return failure_of(one_block(32), [&] {
    const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
    const Fp8Fragments f = fp8_fragments(a, b, lane);
    float acc[4] = {c[g][2 * t], c[g][2 * t + 1], c[g + 8][2 * t], c[g + 8][2 * t + 1]};
    sm80::mma_16832_e4m3(acc, f.a, f.b[0], f.b[1]);
    d[g][2 * t] = acc[0];
    d[g][2 * t + 1] = acc[1];
    d[g + 8][2 * t] = acc[2];
    d[g + 8][2 * t + 1] = acc[3];
  });
}

TEST_P(Schedules, Fp8MmaComputesTheProductOfThePtxFragments) {
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::uint8_t a[16][32], b[32][8];
  float c[16][8];
  for (auto& row : a)
    for (std::uint8_t& x : row) x = random_e4m3(rng);
  for (auto& row : b)
    for (std::uint8_t& x : row) x = random_e4m3(rng);
  for (auto& row : c)
    for (float& x : row) x = dist(rng);
  float d[16][8] = {};
  ASSERT_EQ(run_fp8_mma(a, b, c, d), "");
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double want = c[i][j];
      for (int k = 0; k < 32; ++k) {
        want += static_cast<double>(numeric::fp8_e4m3_to_float(a[i][k])) * numeric::fp8_e4m3_to_float(b[k][j]);
      }
      // Products reach 448^2: fp32 keeps 24 bits of the sum.
      EXPECT_NEAR(d[i][j], want, 1e-6 * std::max(1.0, std::abs(want))) << i << "," << j;
    }
  }
}

TEST_P(Schedules, Fp8MmaGivesNanOnlyWhereANanByteIsRead) {
  std::mt19937 rng(23);
  std::uint8_t a[16][32], b[32][8];
  const float c[16][8] = {};
  for (auto& row : a)
    for (std::uint8_t& x : row) x = random_e4m3(rng);
  for (auto& row : b)
    for (std::uint8_t& x : row) x = random_e4m3(rng);
  a[11][21] = 0x7f;  // row 11 of the product
  b[5][3] = 0xff;    // column 3
  float d[16][8] = {};
  ASSERT_EQ(run_fp8_mma(a, b, c, d), "");
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) EXPECT_EQ(std::isnan(d[i][j]), i == 11 || j == 3) << i << "," << j;
  }
}

// A 32x32 MFMA's 16 accumulators of `lane` into d [32][32], from AMD's
// tables: column lane % 32, row 8 (r / 4) + 4 (lane / 32) + r % 4.
void store_mfma_accumulators(const float (&acc)[16], int lane, std::vector<float>& d) {
  for (int r = 0; r < 16; ++r) {
    const int i = 8 * (r / 4) + 4 * (lane / 32) + r % 4;
    d[static_cast<std::size_t>(i * 32 + lane % 32)] = acc[r];
  }
}

TEST_P(Schedules, MfmaComputesTheProductOfTheCdnaLayout) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> a(32 * 8), b(8 * 32);  // A [32][8], B [8][32]
  for (float& x : a) x = numeric::half_to_float(numeric::float_to_half(dist(rng)));
  for (float& x : b) x = numeric::half_to_float(numeric::float_to_half(dist(rng)));
  std::vector<float> d(32 * 32);
  ASSERT_EQ(failure_of(one_block(64, 0, 64),
                       [&] {
                         const int lane = static_cast<int>(threadIdx.x);
                         std::uint16_t fa[4], fb[4];
                         for (int e = 0; e < 4; ++e) {
                           const int k = 4 * (lane / 32) + e;
                           fa[e] = numeric::float_to_half(a[static_cast<std::size_t>((lane % 32) * 8 + k)]);
                           fb[e] = numeric::float_to_half(b[static_cast<std::size_t>(k * 32 + lane % 32)]);
                         }
                         float acc[16] = {};
                         mfma_32x32x8(Element::float16, acc, fa, fb, {__FILE__, __LINE__});
                         store_mfma_accumulators(acc, lane, d);
                       }),
            "");
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 32; ++j) {
      double want = 0.0;
      for (int k = 0; k < 8; ++k)
        want += static_cast<double>(a[static_cast<std::size_t>(i * 8 + k)]) * b[static_cast<std::size_t>(k * 32 + j)];
      EXPECT_NEAR(d[static_cast<std::size_t>(i * 32 + j)], want, 1e-5) << i << "," << j;
    }
  }
}

// CDNA3's FNUZ e4m3 is OCP's e4m3fn with one more exponent bias: every code
// but the NaNs (fn: 0x7f, 0xff; fnuz: 0x80, fn's negative zero) is worth half.
TEST(Emulator, FnuzE4m3IsHalfTheOcpValueOfTheSameByte) {
  for (int code = 0; code < 256; ++code) {
    const auto c = static_cast<std::uint8_t>(code);
    if (fnuz_e4m3_nan(c)) {
      EXPECT_TRUE(std::isnan(fp8_e4m3fnuz_to_float(c)));
    } else if (!ocp_e4m3_nan(c)) {
      EXPECT_EQ(fp8_e4m3fnuz_to_float(c), numeric::fp8_e4m3_to_float(c) / 2.0f) << code;
    }
  }
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x7f), 240.0f);
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x01), std::ldexp(1.0f, -10));
}

// The oracle's FNUZ value: half of OCP's, and +-240 for 0x7f / 0xff (NaN in OCP).
double fnuz_value(std::uint8_t c) {
  if (ocp_e4m3_nan(c)) return (c & 0x80) != 0 ? -240.0 : 240.0;
  return numeric::fp8_e4m3_to_float(c) / 2.0;
}

TEST_P(Schedules, Fp8MfmaComputesTheProductOfTheCdna3Layout) {
  std::mt19937 rng(29);
  std::vector<std::uint8_t> a(32 * 16), b(16 * 32);  // A [32][16], B [16][32]
  for (auto* m : {&a, &b}) {
    for (std::uint8_t& x : *m) x = random_code(rng, fnuz_e4m3_nan);
  }
  std::vector<float> d(32 * 32);
  ASSERT_EQ(failure_of(one_block(64, 0, 64),
                       [&] {
                         const int lane = static_cast<int>(threadIdx.x);
                         std::uint64_t fa = 0, fb = 0;
                         for (int e = 0; e < 8; ++e) {
                           const int k = 8 * (lane / 32) + e;
                           fa |= std::uint64_t{a[static_cast<std::size_t>((lane % 32) * 16 + k)]} << (8 * e);
                           fb |= std::uint64_t{b[static_cast<std::size_t>(k * 32 + lane % 32)]} << (8 * e);
                         }
                         float acc[16] = {};
                         mfma_32x32x16_fp8(acc, fa, fb, {__FILE__, __LINE__});
                         store_mfma_accumulators(acc, lane, d);
                       }),
            "");
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 32; ++j) {
      double want = 0.0;
      for (int k = 0; k < 16; ++k) {
        want +=
            fnuz_value(a[static_cast<std::size_t>(i * 16 + k)]) * fnuz_value(b[static_cast<std::size_t>(k * 32 + j)]);
      }
      EXPECT_NEAR(d[static_cast<std::size_t>(i * 32 + j)], want, 1e-6 * std::max(1.0, std::abs(want))) << i << "," << j;
    }
  }
}

TEST(Emulator, CountsWhatItChecked) {
  reset_statistics();
  const std::vector<std::uint16_t> global = rows_of_indices();
  std::vector<std::uint32_t> regs(32 * 4);
  LaunchConfig config = one_block(32);
  config.grid.x = 3;
  ASSERT_EQ(failure_of(config, [&] { copy_then_ldmatrix(global.data(), true, true, false, 0, regs); }), "");
  const Statistics stats = statistics();
  EXPECT_EQ(stats.launches, 1u);
  EXPECT_EQ(stats.blocks, 3u);
  EXPECT_EQ(stats.shared_checks, 3u * (32 + 32));  // per block: 32 copies, 32 ldmatrix rows
  EXPECT_EQ(stats.barrier_checks, 3u * 32);
  EXPECT_EQ(stats.collective_checks, 3u * 32);
  EXPECT_NE(describe(stats).find("hazard checks"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Both, Schedules, ::testing::Values(Schedule::forward, Schedule::reverse), schedule_name);

}  // namespace
}  // namespace mla::simt
