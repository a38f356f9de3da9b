// The kernels' inline exp2 against libm (the element codecs are the shared
// ones, tested in tests/core; the micro-GEMM blocks are checked through the
// attention tests against REFERENCE).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "flash_math.hpp"

namespace mla::kokkos {
namespace {

TEST(KokkosMath, Exp2NonPositiveIsAccurateAndZeroBelowRange) {
  double worst = 0.0;
  for (int i = 0; i <= 1260000; ++i) {
    const float x = -static_cast<float>(i) * 1e-4f;
    const double expected = std::exp2(static_cast<double>(x));
    const float got = exp2_nonpositive(x);
    ASSERT_TRUE(std::isfinite(got)) << "exp2_nonpositive(" << x << ") = " << got;  // max() would drop a NaN
    worst = std::max(worst, std::abs(got / expected - 1.0));
  }
  EXPECT_LT(worst, 5e-7);  // 2^-22: a few fp32 ulps
  EXPECT_EQ(exp2_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp2_nonpositive(-127.0f), 0.0f);
  EXPECT_EQ(exp2_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
}

}  // namespace
}  // namespace mla::kokkos
