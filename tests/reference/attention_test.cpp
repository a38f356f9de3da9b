// REFERENCE attention on cases small enough to work out by hand, plus a
// comparison with the textbook formula on random varlen batches.
#include <cmath>
#include <limits>

#include "mla/detail/numeric.hpp"
#include "reference/reference_helpers.hpp"

namespace mla::testing {
namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();
constexpr MlaDims tiny_dims{1, 1, 1};  // dqk = 2, V = 1

float lse_at(const AttentionResult& r, std::int64_t head, std::int64_t token) {
  return load_as_float(r.lse.data, DType::float32, r.lse.offset(head, token));
}
float out_at(const AttentionResult& r, std::int64_t token, std::int64_t head, std::int64_t d = 0) {
  return load_as_float(r.out.data, r.out.dtype, r.out.offset(token, head, d));
}

// One query, two keys, scale 1: scores 2 and -1, so the weights are
// e^2 / (e^2 + e^-1) and e^-1 / (e^2 + e^-1).
TEST(ReferenceAttention, TwoKeysGiveSoftmaxWeights) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params(tiny_dims));
  const HostTensor q = tensor_of({1, 1, 2}, {1.0f, 0.5f});
  const HostTensor k = tensor_of({2, 1, 2}, {2.0f, 0.0f, 0.0f, -2.0f});
  const HostTensor v = tensor_of({2, 1, 1}, {3.0f, -1.0f});
  backend->prepare(host, PrefillMetadata::from_lengths({1}, {2}, /*causal=*/false));
  const AttentionResult r = backend->run_new_tokens(host, q.view(), k.view(), v.view(), 1.0f, true);
  const double z = std::exp(2.0) + std::exp(-1.0);
  EXPECT_FLOAT_EQ(out_at(r, 0, 0), static_cast<float>((3.0 * std::exp(2.0) - std::exp(-1.0)) / z));
  EXPECT_FLOAT_EQ(lse_at(r, 0, 0), static_cast<float>(std::log(z)));
}

// Causal, three queries and three keys: query i sees keys 0..i.
TEST(ReferenceAttention, CausalSquareMask) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params(tiny_dims, 1));
  const HostTensor q = tensor_of({3, 1, 2}, {1.0f, 1.0f, 2.0f, 0.0f, 0.0f, 2.0f});
  const HostTensor k = tensor_of({3, 1, 2}, {1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f});
  const HostTensor v = tensor_of({3, 1, 1}, {10.0f, 20.0f, 40.0f});
  backend->prepare(host, PrefillMetadata::from_lengths({3}, {3}));
  const AttentionResult r = backend->run_new_tokens(host, q.view(), k.view(), v.view(), 0.5f, true);
  // Query 0: only key 0, score 0.5 * 1 = 0.5.
  EXPECT_EQ(out_at(r, 0, 0), 10.0f);
  EXPECT_FLOAT_EQ(lse_at(r, 0, 0), 0.5f);
  // Query 1: scores 0.5 * 2 = 1 and 0.
  const double z1 = std::exp(1.0) + 1.0;
  EXPECT_FLOAT_EQ(out_at(r, 1, 0), static_cast<float>((10.0 * std::exp(1.0) + 20.0) / z1));
  EXPECT_FLOAT_EQ(lse_at(r, 0, 1), static_cast<float>(std::log(z1)));
  // Query 2: scores 0, 1, 1.
  const double z2 = 1.0 + 2.0 * std::exp(1.0);
  EXPECT_FLOAT_EQ(out_at(r, 2, 0), static_cast<float>((10.0 + 60.0 * std::exp(1.0)) / z2));
  EXPECT_FLOAT_EQ(lse_at(r, 0, 2), static_cast<float>(std::log(z2)));
}

// sq = 2, sk = 3: bottom-right alignment lets query 0 see keys 0 and 1 and
// query 1 all three. sq = 3, sk = 1 in the second sequence: queries 0 and 1
// see no key (0, -inf); query 2 sees key 0.
TEST(ReferenceAttention, BottomRightAlignedMask) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params(tiny_dims));
  const HostTensor q = tensor_of({5, 1, 2}, {1, 0, 1, 0, 1, 0, 1, 0, 1, 0});
  const HostTensor k = tensor_of({4, 1, 2}, {0, 0, 1, 0, 2, 0, 3, 0});
  const HostTensor v = tensor_of({4, 1, 1}, {1, 2, 4, 8});
  backend->prepare(host, PrefillMetadata::from_lengths({2, 3}, {3, 1}));
  const AttentionResult r = backend->run_new_tokens(host, q.view(), k.view(), v.view(), 1.0f, true);
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  EXPECT_FLOAT_EQ(out_at(r, 0, 0), static_cast<float>((1.0 + 2.0 * e) / (1.0 + e)));
  EXPECT_FLOAT_EQ(out_at(r, 1, 0), static_cast<float>((1.0 + 2.0 * e + 4.0 * e2) / (1.0 + e + e2)));
  EXPECT_EQ(out_at(r, 2, 0), 0.0f);
  EXPECT_EQ(lse_at(r, 0, 2), neg_inf);
  EXPECT_EQ(out_at(r, 3, 0), 0.0f);
  EXPECT_EQ(lse_at(r, 0, 3), neg_inf);
  EXPECT_EQ(out_at(r, 4, 0), 8.0f);
  EXPECT_FLOAT_EQ(lse_at(r, 0, 4), 3.0f);
}

// A context chunk in which one sequence has no keys: its rows are 0 / -inf,
// never NaN, and a sequence with no queries writes nothing.
TEST(ReferenceAttention, ChunkRowsWithoutKeys) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params(tiny_dims, 2));
  PrefillMetadata meta = PrefillMetadata::from_lengths({2, 0, 1}, {2, 0, 1});
  meta.add_chunk({0, 4, 2});
  const HostTensor q = tensor_of({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const HostTensor k = tensor_of({6, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  const HostTensor v = tensor_of({6, 2, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  backend->prepare(host, meta);
  const AttentionResult r = backend->run_context_chunk(host, 0, q.view(), k.view(), v.view(), 1.0f);
  for (std::int64_t t = 0; t < 2; ++t) {
    for (std::int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(out_at(r, t, h), 0.0f);
      EXPECT_EQ(lse_at(r, h, t), neg_inf);
    }
  }
  // Sequence 2's query sees keys 4 and 5 with equal scores: the mean of their values.
  EXPECT_FLOAT_EQ(out_at(r, 2, 0), 10.0f);
  EXPECT_FLOAT_EQ(out_at(r, 2, 1), 11.0f);
  EXPECT_FLOAT_EQ(lse_at(r, 1, 2), static_cast<float>(11.0 + 12.0 + std::log(2.0)));
}

TEST(ReferenceAttention, Fp8OutputIsScaledAndSaturated) {
  Queue host = Queue::host();
  auto backend = make_reference(tiny_params(tiny_dims));
  const HostTensor q = tensor_of({2, 1, 2}, {0, 0, 0, 0});
  const HostTensor k = tensor_of({2, 1, 2}, {1, 1, 1, 1});
  const HostTensor v = tensor_of({2, 1, 1}, {3.0f, 1000.0f});
  backend->prepare(host, PrefillMetadata::from_lengths({2}, {2}));
  HostTensor out(DType::float8_e4m3, {2, 1, 1});
  backend->run_new_tokens(host, q.view(), k.view(), v.view(), 1.0f, false, out.view(), 2.0f);
  // Token 0: 3 / 2 = 1.5, exact in e4m3. Token 1: mean 501.5 / 2 = 250.75 -> 256.
  EXPECT_EQ(out.at(0, 0, 0), 1.5f);
  EXPECT_EQ(out.at(1, 0, 0), numeric::fp8_e4m3_to_float(numeric::float_to_fp8_e4m3(250.75f)));
  backend->run_new_tokens(host, q.view(), k.view(), v.view(), 1.0f, false, out.view(), 0.5f);
  EXPECT_EQ(out.at(1, 0, 0), 448.0f);  // 1003 saturates
}

// A bf16 run equals the fp32 run on the same (bf16-valued) inputs, rounded once.
TEST(ReferenceAttention, OutputIsRoundedOnceToItsDtype) {
  Queue host = Queue::host();
  std::mt19937_64 rng(7);
  const MlaDims dims{16, 8, 12};
  HostTensor q(DType::bfloat16, {9, 3, 24}), k(DType::bfloat16, {9, 3, 24}), v(DType::bfloat16, {9, 3, 12});
  q.fill_random(rng, -2, 2);
  k.fill_random(rng, -2, 2);
  v.fill_random(rng, -1, 1);
  const auto widen = [](const HostTensor& t) {
    HostTensor wide(DType::float32, {t.size(0), t.size(1), t.size(2)});
    for (std::int64_t i = 0; i < t.size(0); ++i)
      for (std::int64_t j = 0; j < t.size(1); ++j)
        for (std::int64_t d = 0; d < t.size(2); ++d) wide.set(t.at(i, j, d), i, j, d);
    return wide;
  };
  const HostTensor q32 = widen(q), k32 = widen(k), v32 = widen(v);
  const PrefillMetadata meta = PrefillMetadata::from_lengths({4, 5}, {4, 5});
  auto narrow = make_reference(tiny_params(dims, 3, DType::bfloat16));
  auto wide = make_reference(tiny_params(dims, 3, DType::float32));
  narrow->prepare(host, meta);
  wide->prepare(host, meta);
  const AttentionResult r16 = narrow->run_new_tokens(host, q.view(), k.view(), v.view(), 0.3f, true);
  const AttentionResult r32 = wide->run_new_tokens(host, q32.view(), k32.view(), v32.view(), 0.3f, true);
  for (std::int64_t t = 0; t < 9; ++t) {
    for (std::int64_t h = 0; h < 3; ++h) {
      EXPECT_EQ(lse_at(r16, h, t), lse_at(r32, h, t));
      for (std::int64_t d = 0; d < 12; ++d)
        EXPECT_EQ(out_at(r16, t, h, d), round_to_dtype(out_at(r32, t, h, d), DType::bfloat16));
    }
  }
}

// The same numbers laid out three ways give bit-identical results: q with
// padded heads, k stored head-major ([H, Nk, dqk] seen as [Nk, H, dqk]), v the
// tail of a fused [Nk, H, P + V] buffer; out into a padded view.
TEST(ReferenceAttention, StridesAreHonoured) {
  Queue host = Queue::host();
  std::mt19937_64 rng(11);
  const MlaDims dims{8, 4, 6};
  const std::int64_t nq = 7, h = 2, dqk = 12, dv = 6;
  HostTensor q(DType::float16, {nq, h, dqk}), k(DType::float16, {nq, h, dqk}), v(DType::float16, {nq, h, dv});
  q.fill_random(rng, -2, 2);
  k.fill_random(rng, -2, 2);
  v.fill_random(rng, -1, 1);
  HostTensor qs(DType::float16, {nq, h, dqk}, {h * (dqk + 5), dqk + 5, 1});
  HostTensor ks(DType::float16, {nq, h, dqk}, {dqk, nq * dqk, 1});
  HostTensor vs(DType::float16, {nq, h, dv}, {h * (8 + dv), 8 + dv, 1}, 8);
  for (std::int64_t t = 0; t < nq; ++t)
    for (std::int64_t i = 0; i < h; ++i) {
      for (std::int64_t d = 0; d < dqk; ++d) qs.set(q.at(t, i, d), t, i, d), ks.set(k.at(t, i, d), t, i, d);
      for (std::int64_t d = 0; d < dv; ++d) vs.set(v.at(t, i, d), t, i, d);
    }
  auto backend = make_reference(tiny_params(dims, 2, DType::float16));
  backend->prepare(host, PrefillMetadata::from_lengths({3, 4}, {3, 4}));
  const AttentionResult plain = backend->run_new_tokens(host, q.view(), k.view(), v.view(), 0.25f, true);
  HostTensor out(DType::float16, {nq, h, dv}, {h * (dv + 3) + 1, dv + 3, 1}, 2, 9);
  const AttentionResult strided =
      backend->run_new_tokens(host, qs.view(), ks.view(), vs.view(), 0.25f, true, out.view());
  EXPECT_TRUE(out.padding_untouched());
  for (std::int64_t t = 0; t < nq; ++t)
    for (std::int64_t i = 0; i < h; ++i) {
      EXPECT_EQ(lse_at(plain, i, t), lse_at(strided, i, t));
      for (std::int64_t d = 0; d < dv; ++d) EXPECT_EQ(out_at(plain, t, i, d), out.at(t, i, d));
    }
}

// Random varlen batches against softmax written out the textbook way.
TEST(ReferenceAttention, MatchesTextbookFormulaOnRandomBatches) {
  Queue host = Queue::host();
  std::mt19937_64 rng(3);
  const MlaDims dims{12, 4, 10};
  const std::int64_t h = 3, dqk = 16, dv = 10;
  const float scale = 0.35f;
  const std::vector<int> q_lens{0, 1, 7, 13, 2}, k_lens{3, 1, 9, 13, 0};
  const PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, k_lens);
  HostTensor q(DType::float32, {meta.num_q_tokens(), h, dqk}), k(DType::float32, {meta.num_k_tokens(), h, dqk}),
      v(DType::float32, {meta.num_k_tokens(), h, dv});
  q.fill_random(rng, -2, 2);
  k.fill_random(rng, -2, 2);
  v.fill_random(rng, -1, 1);
  auto backend = make_reference(tiny_params(dims, 3));
  backend->prepare(host, meta);
  const AttentionResult r = backend->run_new_tokens(host, q.view(), k.view(), v.view(), scale, true);
  const auto q0 = offsets_of(q_lens), k0 = offsets_of(k_lens);
  for (std::size_t b = 0; b < q_lens.size(); ++b) {
    for (int i = 0; i < q_lens[b]; ++i) {
      for (std::int64_t head = 0; head < h; ++head) {
        const std::int64_t token = q0[b] + i;
        std::vector<double> weights;
        for (int j = 0; j < k_lens[b] && j <= i + k_lens[b] - q_lens[b]; ++j) {
          double s = 0;
          for (std::int64_t d = 0; d < dqk; ++d) s += double(q.at(token, head, d)) * k.at(k0[b] + j, head, d);
          weights.push_back(std::exp(scale * s));
        }
        double z = 0;
        for (double w : weights) z += w;
        if (weights.empty()) {
          EXPECT_EQ(lse_at(r, head, token), neg_inf);
          continue;
        }
        EXPECT_NEAR(lse_at(r, head, token), std::log(z), 1e-5);
        for (std::int64_t d = 0; d < dv; ++d) {
          double o = 0;
          for (std::size_t j = 0; j < weights.size(); ++j)
            o += weights[j] / z * v.at(k0[b] + static_cast<std::int64_t>(j), head, d);
          EXPECT_NEAR(out_at(r, token, head, d), o, 1e-6);
        }
      }
    }
  }
}

}  // namespace
}  // namespace mla::testing
