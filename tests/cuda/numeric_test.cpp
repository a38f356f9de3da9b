// The GPU kernels' softmax pieces, compiled for the host: the merge and LSE
// rules of docs/contract.md §2-3 (their element codecs are the shared ones of
// mla/detail/numeric.hpp, tested in tests/core).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cuda_hip/softmax.hpp"

namespace mla {
namespace {

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
