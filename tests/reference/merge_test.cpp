// REFERENCE merge_attn_states, one test per line of docs/contract.md §3.
#include <cmath>
#include <limits>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "reference/reference_helpers.hpp"

namespace mla::testing {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
const float nan = std::numeric_limits<float>::quiet_NaN();

// One head, two channels, one token per case; prefix_out = (1, 2) and
// suffix_out = (5, 7) unless a test says otherwise.
struct TinyMerge {
  HostTensor prefix_out = tensor_of({1, 1, 2}, {1.0f, 2.0f});
  HostTensor suffix_out = tensor_of({1, 1, 2}, {5.0f, 7.0f});
  HostTensor prefix_lse = tensor_of({1, 1}, {0.0f});
  HostTensor suffix_lse = tensor_of({1, 1}, {0.0f});
  HostTensor out = HostTensor(DType::float32, {1, 1, 2});
  HostTensor out_lse = HostTensor(DType::float32, {1, 1});

  void run(std::optional<std::int64_t> cutoff = std::nullopt) {
    Queue host = Queue::host();
    auto backend = make_reference(tiny_params({1, 1, 2}));
    backend->merge_attn_states(host, {prefix_out.view(), prefix_lse.view(), suffix_out.view(), suffix_lse.view(),
                                      out.view(), out_lse.view(), cutoff, std::nullopt});
  }
};

TEST(ReferenceMerge, WeightsAreSoftmaxOfTheLses) {
  TinyMerge m;
  m.prefix_lse.set(0.0f, 0, 0);
  m.suffix_lse.set(static_cast<float>(std::log(3.0)), 0, 0);
  m.run();
  // Weights 1/4 and 3/4; the LSE of the union is log(1 + 3).
  EXPECT_FLOAT_EQ(m.out.at(0, 0, 0), 0.25f * 1 + 0.75f * 5);
  EXPECT_FLOAT_EQ(m.out.at(0, 0, 1), 0.25f * 2 + 0.75f * 7);
  EXPECT_FLOAT_EQ(m.out_lse.at(0, 0), static_cast<float>(std::log(4.0)));
}

TEST(ReferenceMerge, LargeLseGapDoesNotOverflow) {
  TinyMerge m;
  m.prefix_lse.set(200.0f, 0, 0);
  m.suffix_lse.set(-200.0f, 0, 0);
  m.run();
  EXPECT_EQ(m.out.at(0, 0, 0), 1.0f);
  EXPECT_EQ(m.out_lse.at(0, 0), 200.0f);
}

// An empty prefix (-inf) leaves the suffix; its output is not even read, so a
// NaN there cannot leak.
TEST(ReferenceMerge, EmptyPrefixGivesTheSuffix) {
  TinyMerge m;
  m.prefix_out = tensor_of({1, 1, 2}, {nan, nan});
  m.prefix_lse.set(-inf, 0, 0);
  m.suffix_lse.set(1.5f, 0, 0);
  m.run();
  EXPECT_EQ(m.out.at(0, 0, 0), 5.0f);
  EXPECT_EQ(m.out.at(0, 0, 1), 7.0f);
  EXPECT_EQ(m.out_lse.at(0, 0), 1.5f);
}

TEST(ReferenceMerge, EmptySuffixGivesThePrefix) {
  TinyMerge m;
  m.prefix_lse.set(2.0f, 0, 0);
  m.suffix_lse.set(-inf, 0, 0);
  m.run();
  EXPECT_EQ(m.out.at(0, 0, 0), 1.0f);
  EXPECT_EQ(m.out.at(0, 0, 1), 2.0f);
  EXPECT_EQ(m.out_lse.at(0, 0), 2.0f);
}

// FA2 reported empty rows as +inf; +inf is treated as -inf, never as "all weight".
TEST(ReferenceMerge, PlusInfinityMeansEmpty) {
  TinyMerge m;
  m.prefix_lse.set(inf, 0, 0);
  m.suffix_lse.set(0.5f, 0, 0);
  m.run();
  EXPECT_EQ(m.out.at(0, 0, 0), 5.0f);
  EXPECT_EQ(m.out_lse.at(0, 0), 0.5f);
}

TEST(ReferenceMerge, BothEmptyGiveZeroAndMinusInfinity) {
  for (const auto& [p, s] : {std::pair{-inf, -inf}, std::pair{inf, inf}, std::pair{inf, -inf}}) {
    TinyMerge m;
    m.prefix_out = tensor_of({1, 1, 2}, {nan, nan});
    m.suffix_out = tensor_of({1, 1, 2}, {nan, nan});
    m.prefix_lse.set(p, 0, 0);
    m.suffix_lse.set(s, 0, 0);
    m.run();
    EXPECT_EQ(m.out.at(0, 0, 0), 0.0f);
    EXPECT_EQ(m.out.at(0, 0, 1), 0.0f);
    EXPECT_EQ(m.out_lse.at(0, 0), -inf);
  }
}

// Tokens t >= T copy the suffix, output and LSE, whatever the prefix says.
TEST(ReferenceMerge, TokensPastCutoffCopyTheSuffix) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params({1, 1, 1}));
  const HostTensor prefix_out = tensor_of({3, 1, 1}, {1, 2, 3});
  const HostTensor suffix_out = tensor_of({3, 1, 1}, {10, 20, 30});
  const HostTensor prefix_lse = tensor_of({1, 3}, {0, 5, 5});
  const HostTensor suffix_lse = tensor_of({1, 3}, {0, -1, -inf});
  HostTensor out(DType::float32, {3, 1, 1}), out_lse(DType::float32, {1, 3});
  backend->merge_attn_states(host, {prefix_out.view(), prefix_lse.view(), suffix_out.view(), suffix_lse.view(),
                                    out.view(), out_lse.view(), 1, std::nullopt});
  EXPECT_FLOAT_EQ(out.at(0, 0, 0), 5.5f);  // merged: equal weights
  EXPECT_EQ(out.at(1, 0, 0), 20.0f);
  EXPECT_EQ(out_lse.at(0, 1), -1.0f);
  EXPECT_EQ(out.at(2, 0, 0), 30.0f);
  EXPECT_EQ(out_lse.at(0, 2), -inf);
}

TEST(ReferenceMerge, Fp8OutputIsScaledAndSaturated) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params({1, 1, 2}));
  const HostTensor prefix_out = tensor_of({1, 1, 2}, {3.0f, 1000.0f});
  const HostTensor suffix_out = tensor_of({1, 1, 2}, {3.0f, 1000.0f});
  const HostTensor lse = tensor_of({1, 1}, {0.7f});
  HostTensor out(DType::float8_e4m3, {1, 1, 2});
  backend->merge_attn_states(host, {prefix_out.view(), lse.view(), suffix_out.view(), lse.view(), out.view(),
                                    TensorView{}, std::nullopt, 2.0f});
  EXPECT_EQ(out.at(0, 0, 0), 1.5f);
  EXPECT_EQ(out.at(0, 0, 1), 448.0f);
}

// vLLM PR 42642: a prefix whose head stride is 192 for V = 128. Each operand
// has its own strides; results equal the contiguous merge bit for bit and
// nothing outside the views is written. out_lse is optional.
TEST(ReferenceMerge, EveryOperandHasItsOwnStrides) {
  Queue host = Queue::host();
  std::mt19937_64 rng(5);
  const std::int64_t n = 13, h = 3, dv = 128;
  auto backend = make_reference(tiny_params({128, 64, 128}, 3, DType::bfloat16));
  HostTensor prefix(DType::bfloat16, {n, h, dv}, {h * 192, 192, 1});
  HostTensor suffix(DType::bfloat16, {n, h, dv});
  HostTensor prefix_lse(DType::float32, {h, n}, {1, h});  // token-major
  HostTensor suffix_lse(DType::float32, {h, n});
  prefix.fill_random(rng, -1, 1);
  suffix.fill_random(rng, -1, 1);
  prefix_lse.fill_random(rng, -3, 3);
  suffix_lse.fill_random(rng, -3, 3);
  HostTensor prefix_dense(DType::bfloat16, {n, h, dv}), prefix_lse_dense(DType::float32, {h, n});
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < h; ++i) {
      prefix_lse_dense.set(prefix_lse.at(i, t), i, t);
      for (std::int64_t d = 0; d < dv; ++d) prefix_dense.set(prefix.at(t, i, d), t, i, d);
    }
  HostTensor dense_out(DType::bfloat16, {n, h, dv}), dense_lse(DType::float32, {h, n});
  backend->merge_attn_states(host, {prefix_dense.view(), prefix_lse_dense.view(), suffix.view(), suffix_lse.view(),
                                    dense_out.view(), dense_lse.view(), std::nullopt, std::nullopt});
  HostTensor out(DType::bfloat16, {n, h, dv}, {h * (dv + 8) + 8, dv + 8, 1}, 4, 300);
  backend->merge_attn_states(host, {prefix.view(), prefix_lse.view(), suffix.view(), suffix_lse.view(), out.view(),
                                    TensorView{}, std::nullopt, std::nullopt});
  EXPECT_TRUE(out.padding_untouched());
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t i = 0; i < h; ++i) {
      const double pw = std::exp(double(prefix_lse.at(i, t))), sw = std::exp(double(suffix_lse.at(i, t)));
      EXPECT_FLOAT_EQ(dense_lse.at(i, t), static_cast<float>(std::log(pw + sw)));
      for (std::int64_t d = 0; d < dv; ++d) {
        ASSERT_EQ(out.at(t, i, d), dense_out.at(t, i, d)) << "token " << t << ", head " << i << ", element " << d;
        const double expected = (prefix.at(t, i, d) * pw + suffix.at(t, i, d) * sw) / (pw + sw);
        ASSERT_NEAR(out.at(t, i, d), expected, std::abs(expected) / 256.0);  // half a bf16 step
      }
    }
  }
}

#if defined(__linux__)
// Token 1 of the prefix and of the output lies 2^31 + 64 elements past token
// 0, so a 32-bit index would wrap. The address space is reserved without
// backing; only the pages written are ever committed.
TEST(ReferenceMerge, IndexesBeyond32Bits) {
  const std::int64_t far = (std::int64_t{1} << 31) + 64;
  const std::size_t bytes = static_cast<std::size_t>(2 * far + 128) * sizeof(float);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) GTEST_SKIP() << "cannot reserve " << bytes << " bytes of address space";
  auto* floats = static_cast<float*>(base);
  TensorView prefix = TensorView::contiguous(floats, DType::float32, {2, 1, 4});
  // out starts past prefix's last row: outputs must not share an input's span.
  TensorView out = TensorView::contiguous(floats + far + 64, DType::float32, {2, 1, 4});
  prefix.stride[0] = out.stride[0] = far;
  for (std::int64_t d = 0; d < 4; ++d) floats[d] = floats[far + d] = static_cast<float>(d + 1);
  const HostTensor suffix = tensor_of({2, 1, 4}, {-1, -2, -3, -4, -5, -6, -7, -8});
  const HostTensor prefix_lse = tensor_of({1, 2}, {0.0f, 0.0f});
  const HostTensor suffix_lse = tensor_of({1, 2}, {-inf, 0.0f});
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params({2, 2, 4}));
  backend->merge_attn_states(host, {prefix, prefix_lse.view(), suffix.view(), suffix_lse.view(), out, TensorView{},
                                    std::nullopt, std::nullopt});
  for (std::int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(floats[far + 64 + d], static_cast<float>(d + 1));  // token 0: the prefix
    EXPECT_EQ(floats[2 * far + 64 + d], 0.5f * static_cast<float>(d + 1) + 0.5f * (-5.0f - static_cast<float>(d)));
  }
  munmap(base, bytes);
}
#endif

}  // namespace
}  // namespace mla::testing
