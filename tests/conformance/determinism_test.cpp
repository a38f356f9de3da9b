// Determinism and batch invariance (docs/contract.md §6): the same inputs
// give the same bits on every run, and a sequence's output and LSE do not
// change, bit for bit, when other sequences join or leave the batch or when
// it moves within the batch. Checked for every backend the build has, the
// GPU kernels under the emulator, through whole prefill steps with context.
#include <bit>
#include <cstring>

#include "conformance/conformance_fixture.hpp"

namespace mla::testing {
namespace {

// One sequence's tensors: new-token q, k, v and one context chunk's k, v.
struct Sequence {
  int new_tokens = 0;
  int context = 0;
  HostTensor q, k, v, ck, cv;
};

class Determinism : public Conformance {
 protected:
  Sequence sequence(int new_tokens, int context) {
    Sequence s;
    s.new_tokens = new_tokens;
    s.context = context;
    s.q = random_tensor({new_tokens, heads(), qk_dim()}, -2.0f, 2.0f);
    s.k = random_tensor({new_tokens, heads(), qk_dim()}, -2.0f, 2.0f);
    s.v = random_tensor({new_tokens, heads(), v_dim()}, -1.0f, 1.0f);
    s.ck = random_tensor({context, heads(), qk_dim()}, -2.0f, 2.0f);
    s.cv = random_tensor({context, heads(), v_dim()}, -1.0f, 1.0f);
    return s;
  }

  // The batch's tensors: each sequence's rows in batch order.
  static HostTensor stack(const std::vector<const Sequence*>& batch, HostTensor Sequence::*member, int dim) {
    std::int64_t rows = 0;
    for (const Sequence* s : batch) rows += (s->*member).size(0);
    const HostTensor& first = batch.front()->*member;
    HostTensor out(first.dtype(), {rows, first.size(1), dim});
    std::int64_t row = 0;
    for (const Sequence* s : batch) {
      const HostTensor& part = s->*member;
      for (std::int64_t t = 0; t < part.size(0); ++t, ++row)
        for (std::int64_t h = 0; h < part.size(1); ++h)
          for (std::int64_t d = 0; d < dim; ++d) out.set(part.at(t, h, d), row, h, d);
    }
    return out;
  }

  // One prefill step (new tokens + one chunk) over `batch`; out and lse on the host.
  std::pair<HostTensor, HostTensor> step(const std::vector<const Sequence*>& batch) {
    std::vector<int> q_lens, ctx_lens;
    for (const Sequence* s : batch) {
      q_lens.push_back(s->new_tokens);
      ctx_lens.push_back(s->context);
    }
    PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
    meta.add_chunk(ctx_lens);
    const HostTensor q = stack(batch, &Sequence::q, qk_dim()), k = stack(batch, &Sequence::k, qk_dim());
    const HostTensor v = stack(batch, &Sequence::v, v_dim());
    const HostTensor ck = stack(batch, &Sequence::ck, qk_dim()), cv = stack(batch, &Sequence::cv, v_dim());
    const DeviceTensor dq = upload(queue_, q), dk = upload(queue_, k), dv = upload(queue_, v);
    const DeviceTensor dck = upload(queue_, ck), dcv = upload(queue_, cv);
    const AttentionResult result =
        run_prefill_step(*backend_, queue_, meta, dq.view, dk.view, dv.view, {dck.view}, {dcv.view}, scale_);
    queue_.wait();
    return {fetch(result.out), fetch(result.lse)};
  }

  // Whether rows [first, first + n) of `a` equal rows [second, second + n) of `b`, bit for bit.
  ::testing::AssertionResult same_rows(const std::pair<HostTensor, HostTensor>& a, std::int64_t first,
                                       const std::pair<HostTensor, HostTensor>& b, std::int64_t second,
                                       std::int64_t n) {
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t h = 0; h < heads(); ++h) {
        for (std::int64_t d = 0; d < v_dim(); ++d) {
          if (std::bit_cast<std::uint32_t>(a.first.at(first + t, h, d)) !=
              std::bit_cast<std::uint32_t>(b.first.at(second + t, h, d)))
            return ::testing::AssertionFailure() << "out differs at row " << t << " head " << h << " dim " << d;
        }
        if (std::bit_cast<std::uint32_t>(a.second.at(h, first + t)) !=
            std::bit_cast<std::uint32_t>(b.second.at(h, second + t)))
          return ::testing::AssertionFailure() << "lse differs at row " << t << " head " << h;
      }
    }
    return ::testing::AssertionSuccess();
  }
};

TEST_P(Determinism, RepeatedStepsGiveTheSameBits) {
  const Sequence a = sequence(37, 50), b = sequence(1, 0), c = sequence(70, 9);
  const std::vector<const Sequence*> batch{&a, &b, &c};
  const auto first = step(batch);
  for (int run = 0; run < 2; ++run) EXPECT_TRUE(same_rows(first, 0, step(batch), 0, 108)) << "run " << run;
}

// The sequence under watch (s) alone, then among others, in several places.
// Split-KV is off: its split count follows the batch (docs/contract.md §6).
TEST_P(Determinism, ASequenceDoesNotDependOnTheRestOfTheBatch) {
  const NoKvSplits no_splits;
  const Sequence s = sequence(37, 50), a = sequence(70, 9), b = sequence(1, 0), c = sequence(130, 200);
  const auto alone = step({&s});
  EXPECT_TRUE(same_rows(alone, 0, step({&a, &s}), 70, 37)) << "after a longer sequence";
  EXPECT_TRUE(same_rows(alone, 0, step({&s, &b, &c}), 0, 37)) << "first of three";
  EXPECT_TRUE(same_rows(alone, 0, step({&c, &b, &a, &s}), 201, 37)) << "last of four";
}

INSTANTIATE_TEST_SUITE_P(Shapes, Determinism,
                         ::testing::Values(ConformanceShape{DType::bfloat16, deepseek_dims, 2},
                                           ConformanceShape{DType::float16, {64, 64, 128}, 1},
                                           ConformanceShape{DType::float32, deepseek_dims, 2}),
                         shape_name);

}  // namespace
}  // namespace mla::testing
