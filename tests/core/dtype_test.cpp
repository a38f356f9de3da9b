#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace {

using mla::DType;

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3}) {
    EXPECT_EQ(mla::parse_dtype(mla::dtype_name(d)), d);
  }
  EXPECT_EQ(mla::parse_dtype("bf16"), DType::bfloat16);
  EXPECT_EQ(mla::parse_dtype("fp16"), DType::float16);
  EXPECT_EQ(mla::dtype_size(DType::bfloat16), 2u);
  EXPECT_EQ(mla::dtype_size(DType::float8_e4m3), 1u);
}

TEST(DType, UnknownNameListsOptions) {
  try {
    mla::parse_dtype("int8");
    FAIL() << "no error";
  } catch (const mla::Error& e) {
    EXPECT_EQ(e.category(), mla::ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("'int8'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos);
  }
}

TEST(DType, HalfKnownValues) {
  EXPECT_EQ(mla::numeric::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(mla::numeric::float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(mla::numeric::float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(mla::numeric::float_to_half(65520.0f), 0x7c00);                  // rounds to infinity
  EXPECT_EQ(mla::numeric::float_to_half(5.9604644775390625e-08f), 0x0001);   // smallest subnormal
  EXPECT_EQ(mla::numeric::float_to_half(2.98023223876953125e-08f), 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(mla::numeric::float_to_half(1.0f + 1.0f / 2048.0f), 0x3c00);     // tie between 1 and 1+2^-10: even
  EXPECT_EQ(mla::numeric::float_to_half(1.0f + 3.0f / 2048.0f), 0x3c02);     // tie: rounds up to even
  EXPECT_TRUE(std::isnan(mla::numeric::half_to_float(mla::numeric::float_to_half(std::nanf("")))));
  EXPECT_TRUE(std::isinf(mla::numeric::half_to_float(0x7c00)));
}

TEST(DType, HalfRoundTripIsExactForEveryFiniteHalf) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = mla::numeric::half_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(mla::numeric::float_to_half(f), h) << "bits " << bits;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(mla::numeric::float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7: even is 1.
  EXPECT_EQ(mla::numeric::float_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80);
  EXPECT_EQ(mla::numeric::float_to_bf16(1.0f + 3.0f / 256.0f), 0x3f82);
  EXPECT_TRUE(std::isnan(mla::numeric::bf16_to_float(mla::numeric::float_to_bf16(std::nanf("")))));
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = mla::numeric::bf16_to_float(static_cast<std::uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(mla::numeric::float_to_bf16(f), bits);
  }
}

TEST(DType, Fp8E4m3KnownValuesAndSaturation) {
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(1e6f), 0x7e);  // saturates, no infinity in e4m3fn
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(0.001953125f), 0x01);  // 2^-9, smallest subnormal
  EXPECT_FLOAT_EQ(mla::numeric::fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_FLOAT_EQ(mla::numeric::fp8_e4m3_to_float(0x08), 0.015625f);
  EXPECT_TRUE(std::isnan(mla::numeric::fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(mla::numeric::fp8_e4m3_to_float(mla::numeric::float_to_fp8_e4m3(std::nanf("")))));
  for (std::uint32_t bits = 0; bits < 0x100; ++bits) {
    const float f = mla::numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(bits));
    if (std::isnan(f)) continue;
    if (bits == 0x80) continue;  // -0 encodes as 0x80 and round-trips to 0x80
    ASSERT_EQ(mla::numeric::float_to_fp8_e4m3(f), bits) << "bits " << bits;
  }
}

TEST(DType, Fp8RoundsToNearestRepresentable) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-500.0f, 500.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng);
    const float r = mla::round_to_dtype(x, DType::float8_e4m3);
    // No representable value is strictly closer than the one chosen.
    for (std::uint32_t bits = 0; bits < 0x100; ++bits) {
      const float c = mla::numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(bits));
      if (std::isnan(c)) continue;
      const float clamped = std::fmax(std::fmin(x, 448.0f), -448.0f);
      ASSERT_LE(std::fabs(r - clamped), std::fabs(c - clamped) + 1e-6f) << x;
    }
  }
}

TEST(Numeric, Fp8TiesRoundToEvenAndSaturate) {
  // Exact midpoints between neighbouring finite e4m3 values, both signs.
  for (std::uint32_t code = 0; code < 0x7e; ++code) {
    const float lo = mla::numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(code));
    const float hi = mla::numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(code + 1));
    const float mid = (lo + hi) / 2;
    const std::uint8_t even = (code % 2 == 0) ? static_cast<std::uint8_t>(code) : static_cast<std::uint8_t>(code + 1);
    EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(mid), even) << mid;
    EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(-mid), even | 0x80) << -mid;
  }
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(std::nanf("")), 0x7f);
  EXPECT_EQ(mla::numeric::float_to_fp8_e4m3(-std::nanf("")), 0x7f);
}

// Every e4m3 code against the format's definition, written with ldexp:
// subnormals m * 2^-9, normals (8 + m) * 2^(e - 10), NaN for 0x7f and 0xff.
TEST(Numeric, Fp8DecodeFollowsTheFormat) {
  for (unsigned code = 0; code < 256; ++code) {
    const int exponent = static_cast<int>(code >> 3) & 0xf, mantissa = static_cast<int>(code) & 0x7;
    const float decoded = mla::numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(code));
    EXPECT_EQ(std::signbit(decoded), (code & 0x80u) != 0) << code;
    if (exponent == 0xf && mantissa == 0x7) {
      EXPECT_TRUE(std::isnan(decoded)) << code;
      continue;
    }
    const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                          : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
    EXPECT_EQ(std::fabs(decoded), magnitude) << code;
  }
}

#if defined(__FLT16_MANT_DIG__)
// The shared fp16 codec against the compiler's own _Float16 conversions:
// every half decoded, and floats of every exponent with low bits that hit
// ties, just above and below ties, and random bits encoded.
TEST(Numeric, HalfMatchesTheCompilersFloat16) {
  const auto bits_of = [](auto value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof value);
    return bits;
  };
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    _Float16 compiler_half;
    std::memcpy(&compiler_half, &half, sizeof half);
    const float expected = static_cast<float>(compiler_half);
    const float decoded = mla::numeric::half_to_float(half);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(decoded)) << bits;
    } else {
      ASSERT_EQ(bits_of(decoded), bits_of(expected)) << bits;
    }
  }
  std::mt19937 rng(11);
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    for (std::uint32_t low :
         {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0xffffu, static_cast<std::uint32_t>(rng() & 0xffffu)}) {
      const std::uint32_t bits = high << 16 | low;
      float value = 0.0f;
      std::memcpy(&value, &bits, sizeof value);
      if (std::isnan(value)) continue;
      ASSERT_EQ(mla::numeric::float_to_half(value), bits_of(static_cast<_Float16>(value))) << std::hex << bits;
    }
  }
}
#endif

TEST(DType, LoadStoreThroughEveryDtype) {
  for (DType d : {DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3}) {
    unsigned char buffer[64];
    std::memset(buffer, 0xff, sizeof buffer);
    mla::store_from_float(buffer, d, 3, 1.5f);
    EXPECT_FLOAT_EQ(mla::load_as_float(buffer, d, 3), 1.5f) << mla::dtype_name(d);
    mla::store_from_float(buffer, d, 5, 0.1f);
    EXPECT_EQ(mla::load_as_float(buffer, d, 5), mla::round_to_dtype(0.1f, d)) << mla::dtype_name(d);
  }
  EXPECT_NE(mla::round_to_dtype(0.1f, DType::bfloat16), 0.1f);
  EXPECT_EQ(mla::round_to_dtype(0.1f, DType::float32), 0.1f);
}

}  // namespace
