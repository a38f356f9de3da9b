// The inline conversions and exp2 of the kernels against the library's own
// scalar conversions (core/dtype.hpp) and libm.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "flash_math.hpp"
#include "mla/dtype.hpp"

namespace mla::kokkos {
namespace {

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Random floats over every exponent, plus the edge cases of each format.
std::vector<float> probe_values() {
  std::vector<float> values{0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -65520.0f,
                            6.1e-5f,
                            5.96e-8f,
                            2.98e-8f,
                            2.99e-8f,
                            1e-10f,
                            448.0f,
                            464.0f,
                            -449.0f,
                            0.015625f,
                            0.0146484375f,
                            0.001953125f,
                            0.0009765625f,
                            240.0f,
                            1e30f,
                            -1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = any_bits(rng);
    float value;
    std::memcpy(&value, &bits, sizeof value);
    if (!std::isnan(value)) values.push_back(value);
  }
  return values;
}

TEST(KokkosMath, HalfToFloatMatchesCoreForEveryHalf) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const float expected = half_bits_to_float(half);
    const float got = half_to_float(half);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << "half 0x" << std::hex << h;
    } else {
      ASSERT_EQ(bits_of(got), bits_of(expected)) << "half 0x" << std::hex << h;
    }
  }
}

TEST(KokkosMath, FloatToHalfBf16Fp8MatchCore) {
  for (float value : probe_values()) {
    ASSERT_EQ(float_to_half(value), float_to_half_bits(value)) << value;
    ASSERT_EQ(float_to_bf16(value), float_to_bf16_bits(value)) << value;
    ASSERT_EQ(float_to_fp8_e4m3(value), float_to_fp8_e4m3_bits(value)) << value;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half(nan))));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16(nan))));
  EXPECT_EQ(float_to_fp8_e4m3(nan), float_to_fp8_e4m3_bits(nan));
}

TEST(KokkosMath, Bf16ToFloatIsExactWidening) {
  for (std::uint32_t b = 0; b < 0x10000u; b += 7) {
    const auto bf16 = static_cast<std::uint16_t>(b);
    const float expected = bf16_bits_to_float(bf16);
    if (!std::isnan(expected)) {
      ASSERT_EQ(bits_of(bf16_to_float(bf16)), bits_of(expected));
    }
  }
}

TEST(KokkosMath, Exp2NonPositiveIsAccurateAndZeroBelowRange) {
  double worst = 0.0;
  for (int i = 0; i <= 1260000; ++i) {
    const float x = -static_cast<float>(i) * 1e-4f;
    const double expected = std::exp2(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp2_nonpositive(x) / expected - 1.0));
  }
  EXPECT_LT(worst, 5e-7);  // 2^-22: a few fp32 ulps
  EXPECT_EQ(exp2_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp2_nonpositive(-127.0f), 0.0f);
  EXPECT_EQ(exp2_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

}  // namespace
}  // namespace mla::kokkos
