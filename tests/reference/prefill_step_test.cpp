// run_prefill_step on REFERENCE: new tokens merged with 1..3 context chunks
// equal one causal pass over context + new tokens (bottom-right aligned), on
// random varlen batches with empty and length-1 sequences.
#include <cmath>

#include "reference/reference_helpers.hpp"

namespace mla::testing {
namespace {

struct StepCase {
  std::vector<int> q_lens;
  std::vector<std::vector<int>> chunk_lens;
};

// Random lengths in [0, max_len], with 0 and 1 forced into the batch.
StepCase random_case(std::mt19937_64& rng, int batch, int num_chunks, int max_len) {
  std::uniform_int_distribution<int> length(0, max_len);
  StepCase c;
  for (int b = 0; b < batch; ++b) c.q_lens.push_back(b == 0 ? 0 : b == 1 ? 1 : length(rng));
  for (int i = 0; i < num_chunks; ++i) {
    std::vector<int> lens;
    for (int b = 0; b < batch; ++b) lens.push_back(b == 2 && i == 0 ? 0 : b == 3 ? 1 : length(rng));
    c.chunk_lens.push_back(lens);
  }
  return c;
}

// Copies sequence b's rows of every part, in order, into consecutive rows of `full`.
void append_rows(HostTensor& full, std::int64_t& row, const HostTensor& part, std::int64_t first, std::int64_t count) {
  for (std::int64_t t = first; t < first + count; ++t, ++row)
    for (std::int64_t h = 0; h < part.size(1); ++h)
      for (std::int64_t d = 0; d < part.size(2); ++d) full.set(part.at(t, h, d), row, h, d);
}

void check_step(const StepCase& c, std::uint64_t seed) {
  Queue host = Queue::host();
  std::mt19937_64 rng(seed);
  const MlaDims dims{24, 8, 20};
  const std::int64_t heads = 3, dqk = 32, dv = 20;
  auto backend = make_reference(tiny_params(dims, static_cast<int>(heads)));
  PrefillMetadata meta = PrefillMetadata::from_lengths(c.q_lens, c.q_lens);
  const auto random = [&](std::int64_t n, std::int64_t dim, float bound) {
    HostTensor t(DType::float32, {n, heads, dim});
    t.fill_random(rng, -bound, bound);
    return t;
  };
  std::vector<HostTensor> ck, cv;
  std::vector<TensorView> ck_views, cv_views;
  for (const auto& lens : c.chunk_lens) {
    meta.add_chunk(lens);
    ck.push_back(random(meta.chunks.back().cu_seqlens_k.back(), dqk, 2));
    cv.push_back(random(meta.chunks.back().cu_seqlens_k.back(), dv, 1));
  }
  for (std::size_t i = 0; i < ck.size(); ++i) ck_views.push_back(ck[i].view()), cv_views.push_back(cv[i].view());
  const HostTensor q = random(meta.num_q_tokens(), dqk, 2), k = random(meta.num_k_tokens(), dqk, 2),
                   v = random(meta.num_k_tokens(), dv, 1);
  const AttentionResult step =
      run_prefill_step(*backend, host, meta, q.view(), k.view(), v.view(), ck_views, cv_views, 0.18f);

  std::vector<int> full_lens(c.q_lens.size(), 0);
  for (std::size_t b = 0; b < c.q_lens.size(); ++b) {
    full_lens[b] = c.q_lens[b];
    for (const auto& lens : c.chunk_lens) full_lens[b] += lens[b];
  }
  const auto full_offsets = offsets_of(full_lens);
  HostTensor full_k(DType::float32, {full_offsets.back(), heads, dqk}),
      full_v(DType::float32, {full_offsets.back(), heads, dv});
  std::int64_t row_k = 0, row_v = 0;
  const auto q_offsets = offsets_of(c.q_lens);
  for (std::size_t b = 0; b < c.q_lens.size(); ++b) {
    for (std::size_t i = 0; i < c.chunk_lens.size(); ++i) {
      const auto offsets = offsets_of(c.chunk_lens[i]);
      append_rows(full_k, row_k, ck[i], offsets[b], c.chunk_lens[i][b]);
      append_rows(full_v, row_v, cv[i], offsets[b], c.chunk_lens[i][b]);
    }
    append_rows(full_k, row_k, k, q_offsets[b], c.q_lens[b]);
    append_rows(full_v, row_v, v, q_offsets[b], c.q_lens[b]);
  }
  backend->prepare(host, PrefillMetadata::from_lengths(c.q_lens, full_lens));
  const AttentionResult single = backend->run_new_tokens(host, q.view(), full_k.view(), full_v.view(), 0.18f, true);
  // Each merge rounds to fp32 once; nothing else separates the two.
  EXPECT_TRUE(results_match(step.out, step.lse, single.out, single.lse, {1e-6, 1e-5}));
}

TEST(ReferencePrefillStep, NoChunksIsTheNewTokensPass) {
  std::mt19937_64 rng(21);
  check_step(random_case(rng, 5, 0, 9), 1);
}

TEST(ReferencePrefillStep, ChunkedEqualsSinglePass) {
  std::mt19937_64 rng(42);
  for (int num_chunks = 1; num_chunks <= 3; ++num_chunks) {
    for (int trial = 0; trial < 4; ++trial) {
      const StepCase c = random_case(rng, 4 + trial, num_chunks, 3 + 11 * trial);
      SCOPED_TRACE(std::to_string(num_chunks) + " chunk(s), trial " + std::to_string(trial));
      check_step(c, static_cast<std::uint64_t>(100 * num_chunks + trial));
    }
  }
}

}  // namespace
}  // namespace mla::testing
