// The commands' parallel host helpers: every index once, failures passed on,
// and random values that depend on (stream, index) only.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "host_fill.hpp"

namespace mla::tools {
namespace {

TEST(ParallelRanges, CoversEveryIndexOnce) {
  for (const std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1000}, std::int64_t{5'000'003}}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(count));
    parallel_ranges(count, [&](std::int64_t begin, std::int64_t end) {
      ASSERT_LE(0, begin);
      ASSERT_LE(begin, end);
      ASSERT_LE(end, count);
      for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    });
    for (const std::atomic<int>& hit : hits) ASSERT_EQ(hit.load(), 1) << count;
  }
}

TEST(ParallelRanges, RethrowsABodysException) {
  EXPECT_THROW(parallel_ranges(1 << 22,
                               [](std::int64_t begin, std::int64_t) {
                                 if (begin == 0) throw std::runtime_error("first range fails");
                               }),
               std::runtime_error);
}

// The values do not depend on how many there are, and so not on how the
// count was split among threads: a prefix of a longer draw is the shorter draw.
// (3000003 values on 2 threads split at an odd index, inside a Box-Muller pair.)
TEST(RandomNormal, ValueDependsOnStreamAndIndexOnly) {
  const std::vector<float> longer = random_normal(3'000'003, 7);
  const std::vector<float> shorter = random_normal(1000, 7);
  ASSERT_EQ(longer.size(), 3'000'003u);
  for (std::size_t i = 0; i < shorter.size(); ++i) ASSERT_EQ(shorter[i], longer[i]) << i;
  EXPECT_EQ(random_normal(3'000'003, 7), longer);
  const std::vector<float> other = random_normal(1000, 8);
  int equal = 0;
  for (std::size_t i = 0; i < other.size(); ++i) equal += other[i] == shorter[i] ? 1 : 0;
  EXPECT_EQ(equal, 0);
  EXPECT_TRUE(random_normal(0, 7).empty());
}

TEST(RandomNormal, HasTheMomentsOfTheScaledNormal) {
  const std::vector<float> values = random_normal(1 << 20, 20240601, 0.5f);
  double sum = 0.0;
  double squares = 0.0;
  std::int64_t beyond_two_sigma = 0;
  for (const float value : values) {
    ASSERT_TRUE(std::isfinite(value));
    sum += value;
    squares += static_cast<double>(value) * value;
    beyond_two_sigma += std::abs(value) > 1.0f ? 1 : 0;
  }
  const double n = static_cast<double>(values.size());
  EXPECT_NEAR(sum / n, 0.0, 0.005);
  EXPECT_NEAR(std::sqrt(squares / n), 0.5, 0.005);
  // P(|z| > 2) = 4.55% for a normal.
  EXPECT_NEAR(static_cast<double>(beyond_two_sigma) / n, 0.0455, 0.002);
}

}  // namespace
}  // namespace mla::tools
