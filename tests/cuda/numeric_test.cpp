// The GPU kernels' scalar conversions and softmax pieces, compiled for the
// host: bit-identical to core's conversions, and the merge / LSE rules of
// docs/contract.md §2-3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda_hip/numeric.hpp"
#include "cuda_hip/softmax.hpp"
#include "mla/dtype.hpp"

namespace mla {
namespace {

// Every combination of the top 16 bits with low halves that hit ties, just
// above and below ties, and random bits: all exponents, signs, NaN and inf.
std::vector<std::uint32_t> probe_bits() {
  std::mt19937 rng(11);
  std::vector<std::uint32_t> bits;
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    for (std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) bits.push_back(high << 16 | low);
    bits.push_back(high << 16 | (rng() & 0xffffu));
  }
  return bits;
}

TEST(GpuNumeric, Bf16MatchesCore) {
  for (std::uint32_t bits : probe_bits()) {
    const float value = gpu::float_from_bits(bits);
    ASSERT_EQ(gpu::float_to_bf16(value), float_to_bf16_bits(value)) << std::hex << bits;
  }
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const auto bf = static_cast<std::uint16_t>(b);
    const float ours = gpu::bf16_to_float(bf);
    const float core = bf16_bits_to_float(bf);
    ASSERT_TRUE(ours == core || (std::isnan(ours) && std::isnan(core))) << b;
  }
}

TEST(GpuNumeric, Fp8MatchesCore) {
  for (std::uint32_t bits : probe_bits()) {
    const float value = gpu::float_from_bits(bits);
    ASSERT_EQ(gpu::float_to_fp8_e4m3(value), float_to_fp8_e4m3_bits(value)) << std::hex << bits;
  }
}

TEST(GpuNumeric, Fp8TiesRoundToEvenAndSaturate) {
  // Exact midpoints between neighbouring finite e4m3 values, both signs.
  for (std::uint32_t code = 0; code < 0x7e; ++code) {
    const float lo = fp8_e4m3_bits_to_float(static_cast<std::uint8_t>(code));
    const float hi = fp8_e4m3_bits_to_float(static_cast<std::uint8_t>(code + 1));
    const float mid = (lo + hi) / 2;
    const std::uint8_t even = (code % 2 == 0) ? static_cast<std::uint8_t>(code) : static_cast<std::uint8_t>(code + 1);
    EXPECT_EQ(gpu::float_to_fp8_e4m3(mid), even) << mid;
    EXPECT_EQ(gpu::float_to_fp8_e4m3(-mid), even | 0x80) << -mid;
  }
  EXPECT_EQ(gpu::float_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(gpu::float_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(gpu::float_to_fp8_e4m3(std::nanf("")), 0x7f);
}

// The fp8 cache's dequantisation: every one of the 256 codes decodes to
// core's value (NaN codes to a NaN), and back to the same code.
TEST(GpuNumeric, Fp8DecodeMatchesCore) {
  for (unsigned code = 0; code < 256; ++code) {
    const auto byte = static_cast<std::uint8_t>(code);
    const float ours = gpu::fp8_e4m3_to_float(byte);
    const float core = fp8_e4m3_bits_to_float(byte);
    if (std::isnan(core)) {
      EXPECT_TRUE(std::isnan(ours)) << code;
      continue;
    }
    EXPECT_EQ(gpu::float_bits(ours), gpu::float_bits(core)) << code;
    EXPECT_EQ(gpu::float_to_fp8_e4m3(ours), byte) << code;
  }
}

TEST(GpuSoftmax, NaturalLseFromLog2Domain) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> score(-30.0f, 30.0f);
  for (int trial = 0; trial < 200; ++trial) {
    // Scores already scaled into the log2 domain, as the kernels keep them.
    std::vector<float> s(1 + trial % 37);
    for (float& x : s) x = score(rng);
    float max = -INFINITY;
    for (float x : s) max = std::max(max, x);
    float sum = 0.0f;
    double exact = 0.0;
    for (float x : s) {
      sum += std::exp2(x - gpu::exp2_base(max));
      exact += std::exp(static_cast<double>(x) * std::log(2.0));
    }
    EXPECT_NEAR(gpu::natural_lse(max, sum), std::log(exact), 1e-4 * std::max(1.0, std::fabs(std::log(exact))));
  }
  EXPECT_EQ(gpu::natural_lse(-INFINITY, 0.0f), -INFINITY);
  EXPECT_EQ(gpu::output_factor(0.0f), 0.0f);
  // A row that saw no key yet: the base is 0, so exp2 of masked scores is 0, not NaN.
  EXPECT_EQ(gpu::exp2_base(-INFINITY), 0.0f);
  EXPECT_EQ(std::exp2(-INFINITY - gpu::exp2_base(-INFINITY)), 0.0f);
  EXPECT_EQ(gpu::rescale_factor(-INFINITY, 0.0f), 0.0f);
}

TEST(GpuSoftmax, MergeWeightsFollowTheContract) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float p : {-inf, inf}) {
    for (float s : {-inf, inf}) {
      const gpu::MergeWeights w = gpu::merge_weights(p, s);
      EXPECT_EQ(w.prefix, 0.0f);
      EXPECT_EQ(w.suffix, 0.0f);
      EXPECT_EQ(w.lse, -inf);
    }
  }
  const gpu::MergeWeights only_suffix = gpu::merge_weights(inf, 2.5f);
  EXPECT_EQ(only_suffix.prefix, 0.0f);
  EXPECT_EQ(only_suffix.suffix, 1.0f);
  EXPECT_FLOAT_EQ(only_suffix.lse, 2.5f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> lse(-40.0f, 40.0f);
  for (int trial = 0; trial < 500; ++trial) {
    const float p = lse(rng);
    const float s = lse(rng);
    const gpu::MergeWeights w = gpu::merge_weights(p, s);
    const double exact = std::log(std::exp(static_cast<double>(p)) + std::exp(static_cast<double>(s)));
    EXPECT_NEAR(w.lse, exact, 1e-5 * std::max(1.0, std::fabs(exact)));
    EXPECT_NEAR(w.prefix + w.suffix, 1.0f, 1e-6f);
    EXPECT_NEAR(w.prefix, std::exp(static_cast<double>(p) - exact), 1e-5);
  }
  EXPECT_TRUE(std::isnan(gpu::merge_weights(std::nanf(""), 1.0f).lse));
}

}  // namespace
}  // namespace mla
