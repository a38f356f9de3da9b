// HIP_FLASH's MFMA up-projection (hip/projection_kernel.hpp) under the
// emulator, against an fp64 sum of the operands rounded as the kernel rounds
// them: bf16 and fp16 keys and values, kv_b_proj in float32, the compute
// dtype and fp8, the gfx90a and gfx908 MFMA forms. The shape is odd on every
// side: 45 tokens (two 32-token workgroups, the second partial), a latent of
// 37 (a partial k-step), 580 output columns (a second column block where one
// wave has a partial tile and three have none), heads of P + V = 72 + 44
// and 8 rope columns in k that the projection must leave alone. Rows of the
// latents and of kv_b_proj are padded with NaN, which a read past the latent
// dim would carry into the sums; outputs start as NaN.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "mla/detail/numeric.hpp"
#include "mla/tensor.hpp"
#include "simt/emulator.hpp"
#include "simt/emulator_required.hpp"
#include "simt/hip_flash_emulated.hpp"

namespace mla::simt {
namespace {

struct ProjectionCase {
  DType dtype;   // k and v: the operands' dtype
  DType weight;  // kv_b_proj
  AmdTarget target;
};

std::string short_name(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "fp32";
    case DType::float16:
      return "fp16";
    case DType::bfloat16:
      return "bf16";
    case DType::float8_e4m3:
      return "fp8";
  }
  return "?";
}

std::string describe_case(const ProjectionCase& c) {
  return short_name(c.dtype) + "_weights_" + short_name(c.weight) + "_" + amd_target_name(c.target);
}

std::string case_name(const testing::TestParamInfo<ProjectionCase>& info) { return describe_case(info.param); }

void PrintTo(const ProjectionCase& c, std::ostream* os) { *os << describe_case(c); }

// Bits of one element of `dtype` (at most 4 bytes) as float, and back.
float load(DType dtype, const std::uint8_t* at) {
  switch (dtype) {
    case DType::float32: {
      float value = 0;
      std::memcpy(&value, at, sizeof value);
      return value;
    }
    case DType::float16:
    case DType::bfloat16: {
      std::uint16_t bits = 0;
      std::memcpy(&bits, at, sizeof bits);
      return dtype == DType::float16 ? numeric::half_to_float(bits) : numeric::bf16_to_float(bits);
    }
    case DType::float8_e4m3:
      return numeric::fp8_e4m3_to_float(*at);
  }
  return 0;
}

void store(DType dtype, std::uint8_t* at, float value) {
  switch (dtype) {
    case DType::float32:
      std::memcpy(at, &value, sizeof value);
      return;
    case DType::float16:
    case DType::bfloat16: {
      const std::uint16_t bits =
          dtype == DType::float16 ? numeric::float_to_half(value) : numeric::float_to_bf16(value);
      std::memcpy(at, &bits, sizeof bits);
      return;
    }
    case DType::float8_e4m3:
      *at = numeric::float_to_fp8_e4m3(value);
      return;
  }
}

// A value as the kernel's operand: rounded to the compute dtype.
double operand(DType dtype, float value) {
  return dtype == DType::bfloat16 ? numeric::bf16_to_float(numeric::float_to_bf16(value))
                                  : numeric::half_to_float(numeric::float_to_half(value));
}

class HipProjectionEmulated : public testing::TestWithParam<ProjectionCase> {};

TEST_P(HipProjectionEmulated, MatchesFp64OfRoundedOperands) {
  if (!hip_flash_emulated_built()) {
    if (mla::emulator_required()) FAIL() << "emulated HIP_FLASH was not built (MLA_REQUIRE_EMULATOR=1)";
    GTEST_SKIP() << "emulated HIP_FLASH was not built";
  }
  const ProjectionCase& tc = GetParam();
  constexpr std::int64_t tokens = 45, latent = 37, heads = 5, p = 72, v_dim = 44, rope = 8;
  constexpr std::int64_t per_head = p + v_dim, columns = heads * per_head;
  constexpr std::int64_t latent_row = latent + 3, weight_row = latent + 5;  // padded rows
  const std::size_t out_size = dtype_size(tc.dtype), weight_size = dtype_size(tc.weight);
  std::mt19937 rng(2026u + static_cast<unsigned>(tc.weight) * 7u + static_cast<unsigned>(tc.dtype));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  std::vector<float> latents(static_cast<std::size_t>(tokens * latent_row), nan);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t l = 0; l < latent; ++l) latents[static_cast<std::size_t>(t * latent_row + l)] = uniform(rng);
  }
  std::vector<std::uint8_t> weights(static_cast<std::size_t>(columns * weight_row) * weight_size);
  for (std::int64_t c = 0; c < columns; ++c) {
    for (std::int64_t l = 0; l < weight_row; ++l) {
      const float value = l < latent ? 0.5f * uniform(rng) : nan;  // fp8: its NaN code 0x7f
      store(tc.weight, &weights[static_cast<std::size_t>(c * weight_row + l) * weight_size], value);
    }
  }
  std::vector<std::uint8_t> k(static_cast<std::size_t>(tokens * heads * (p + rope)) * out_size, 0xff);
  std::vector<std::uint8_t> v(static_cast<std::size_t>(tokens * heads * v_dim) * out_size, 0xff);

  TensorView latents_view = TensorView::contiguous(latents.data(), DType::float32, {tokens, latent});
  latents_view.stride[0] = latent_row;
  TensorView weight_view = TensorView::contiguous(weights.data(), tc.weight, {columns, latent});
  weight_view.stride[0] = weight_row;
  const TensorView k_view = TensorView::contiguous(k.data(), tc.dtype, {tokens, heads, p + rope});
  const TensorView v_view = TensorView::contiguous(v.data(), tc.dtype, {tokens, heads, v_dim});

  reset_statistics();
  const auto start = std::chrono::steady_clock::now();
  project_latents_hip_emulated(latents_view, weight_view, k_view, v_view, tc.target);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Statistics stats = statistics();
  std::printf("[ timing   ] %s: %.3f s per launch; %s\n", describe_case(tc).c_str(), seconds, describe(stats).c_str());
  EXPECT_EQ(stats.launches, 1u);
  EXPECT_EQ(stats.blocks, 4u) << "2 token blocks x 2 column blocks";

  // The output is the fp32 sum rounded to the compute dtype: half an ulp of
  // it, plus fp32 accumulation error, far below that.
  const double rounding = tc.dtype == DType::bfloat16 ? 1.0 / 256 : 1.0 / 1024;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t c = 0; c < columns; ++c) {
      double want = 0, magnitude = 0;
      for (std::int64_t l = 0; l < latent; ++l) {
        const double x = operand(tc.dtype, latents[static_cast<std::size_t>(t * latent_row + l)]);
        const double w =
            operand(tc.dtype, load(tc.weight, &weights[static_cast<std::size_t>(c * weight_row + l) * weight_size]));
        want += x * w;
        magnitude += std::abs(x * w);
      }
      const std::int64_t head = c / per_head, within = c % per_head;
      const std::int64_t at =
          within < p ? (t * heads + head) * (p + rope) + within : (t * heads + head) * v_dim + (within - p);
      const float got = load(tc.dtype, &(within < p ? k : v)[static_cast<std::size_t>(at) * out_size]);
      const double error = std::abs(got - want);
      if (!(error <= rounding * std::abs(want) + 1e-5 * magnitude)) {
        FAIL() << "token " << t << ", column " << c << " (head " << head << ", " << (within < p ? "k " : "v ")
               << (within < p ? within : within - p) << "): got " << got << ", expected " << want;
      }
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t r = 0; r < rope; ++r) {
        const std::int64_t at = (t * heads + h) * (p + rope) + p + r;
        ASSERT_TRUE(std::isnan(load(tc.dtype, &k[static_cast<std::size_t>(at) * out_size])))
            << "rope column " << r << " of token " << t << ", head " << h << " written";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HipProjectionEmulated,
                         testing::Values(ProjectionCase{DType::bfloat16, DType::bfloat16, AmdTarget::gfx90a},
                                         ProjectionCase{DType::bfloat16, DType::float8_e4m3, AmdTarget::gfx908},
                                         ProjectionCase{DType::float16, DType::float16, AmdTarget::gfx90a},
                                         ProjectionCase{DType::float16, DType::float32, AmdTarget::gfx90a},
                                         ProjectionCase{DType::bfloat16, DType::bfloat16, AmdTarget::gfx942}),
                         case_name);

TEST(HipProjectionEmulatedLaunch, NoTokensLaunchesNothing) {
  if (!hip_flash_emulated_built()) {
    if (mla::emulator_required()) FAIL() << "emulated HIP_FLASH was not built (MLA_REQUIRE_EMULATOR=1)";
    GTEST_SKIP() << "emulated HIP_FLASH was not built";
  }
  std::vector<std::uint16_t> w(4 * 8, 0);
  const TensorView latents = TensorView::contiguous(nullptr, DType::float32, {0, 8});
  const TensorView weight = TensorView::contiguous(w.data(), DType::bfloat16, {4, 8});
  const TensorView k = TensorView::contiguous(nullptr, DType::bfloat16, {0, 1, 3});
  const TensorView v = TensorView::contiguous(nullptr, DType::bfloat16, {0, 1, 2});
  reset_statistics();
  project_latents_hip_emulated(latents, weight, k, v);
  EXPECT_EQ(statistics().launches, 0u);
}

}  // namespace
}  // namespace mla::simt
