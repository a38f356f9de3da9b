// plan_context_chunks: vLLM's plan where vLLM has one, every context token
// exactly once within the budget everywhere, and clear errors;
// pack_context_chunks: full chunks; check_context_plan: coverage.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "error_message.hpp"
#include "mla/error.hpp"
#include "mla/mla_step.hpp"

namespace mla {
namespace {

using Lengths = std::vector<std::int32_t>;

// Each chunk within the budget, and the chunks of each sequence one after the
// other from token 0 to its context length.
void expect_covers(const Lengths& context, const ContextPlan& plan, std::int64_t workspace, int block) {
  std::vector<std::int64_t> next(context.size(), 0);
  ASSERT_EQ(plan.chunk_size.size(), plan.chunks.size());
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    const ContextChunk& chunk = plan.chunks[c];
    ASSERT_EQ(chunk.cu_seqlens_k.size(), context.size() + 1);
    EXPECT_LE(chunk.num_tokens(), workspace) << "chunk " << c;
    EXPECT_GT(chunk.num_tokens(), 0) << "chunk " << c << " is empty";
    EXPECT_EQ(plan.chunk_size[c] % block, 0);
    int longest = 0;
    for (std::size_t b = 0; b < context.size(); ++b) {
      const std::int32_t length = chunk.length(b);
      ASSERT_GE(length, 0);
      EXPECT_LE(length, plan.chunk_size[c]);
      if (length > 0) {
        EXPECT_EQ(chunk.starts[b], next[b]) << "sequence " << b << " chunk " << c;
        next[b] += length;
      }
      longest = std::max(longest, static_cast<int>(length));
    }
    EXPECT_EQ(chunk.max_seqlen_k, longest);
  }
  for (std::size_t b = 0; b < context.size(); ++b) EXPECT_EQ(next[b], context[b]) << "sequence " << b;
}

TEST(ContextPlan, MatchesVllmsPlanWhenEachSequenceGetsABlock) {
  // vLLM: 3 sequences with context, workspace 100, page 16 -> 33 rounded down to 32 tokens each.
  const Lengths context{40, 0, 70, 5};
  const ContextPlan plan = plan_context_chunks(context, 100, 16);
  ASSERT_EQ(plan.chunks.size(), 3u);  // cdiv(70, 32)
  for (std::int64_t size : plan.chunk_size) EXPECT_EQ(size, 32);
  EXPECT_EQ(plan.chunks[0].cu_seqlens_k, (Lengths{0, 32, 32, 64, 69}));
  EXPECT_EQ(plan.chunks[1].cu_seqlens_k, (Lengths{0, 8, 8, 40, 40}));
  EXPECT_EQ(plan.chunks[2].cu_seqlens_k, (Lengths{0, 0, 0, 6, 6}));
  EXPECT_EQ(plan.chunks[1].starts, (Lengths{32, 0, 32, 5}));
  EXPECT_EQ(plan.chunks[2].max_seqlen_k, 6);
  expect_covers(context, plan, 100, 16);
}

TEST(ContextPlan, AWorkspaceOfOneBlockTakesOneSequenceAtATime) {
  const Lengths context{5, 17, 0, 16};
  const ContextPlan plan = plan_context_chunks(context, 16, 16);
  ASSERT_EQ(plan.chunks.size(), 4u);  // 1 + 2 + 1 chunks
  EXPECT_EQ(plan.chunks[0].cu_seqlens_k, (Lengths{0, 5, 5, 5, 5}));
  EXPECT_EQ(plan.chunks[2].cu_seqlens_k, (Lengths{0, 0, 1, 1, 1}));
  EXPECT_EQ(plan.chunks[2].starts[1], 16);
  expect_covers(context, plan, 16, 16);
}

TEST(ContextPlan, EveryBudgetFromOneBlockToEverythingCoversTheContext) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int block = std::vector<int>{1, 16, 64}[static_cast<std::size_t>(trial % 3)];
    Lengths context(1 + rng() % 6);
    for (auto& length : context) length = static_cast<std::int32_t>(rng() % 3 == 0 ? 0 : rng() % 300);
    const std::int64_t total = std::accumulate(context.begin(), context.end(), std::int64_t{0});
    for (std::int64_t workspace :
         {std::int64_t{block}, std::int64_t{block} * 2 + 1, total / 3 + block, total + block}) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " block " + std::to_string(block) + " workspace " +
                   std::to_string(workspace));
      expect_covers(context, plan_context_chunks(context, workspace, block), workspace, block);
    }
  }
}

TEST(ContextPlan, NoContextNoChunks) {
  EXPECT_TRUE(plan_context_chunks({0, 0}, 64, 16).chunks.empty());
  EXPECT_TRUE(plan_context_chunks({}, 64, 16).chunks.empty());
}

TEST(ContextPlan, BadArgumentsAreClearErrors) {
  const auto message = [](auto&& call) { return invalid_argument_message(call); };
  EXPECT_EQ(message([] { plan_context_chunks({4}, 8, 16); }),
            "a workspace of 8 tokens cannot hold one block of 16 tokens");
  EXPECT_EQ(message([] { plan_context_chunks({4}, 8, 0); }), "block size must be at least 1, got 0");
  EXPECT_EQ(message([] { plan_context_chunks({4, -1}, 64, 16); }), "context_lens[1] = -1 is negative");
}

// Packed: contexts end to end, cut every `workspace` tokens, so three short
// contexts share a chunk and a long one runs over two.
TEST(ContextPlan, PackedChunksAreFullAndShareSequences) {
  const Lengths context{10, 0, 12, 30};
  const ContextPlan plan = pack_context_chunks(context, 35);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].cu_seqlens_k, (Lengths{0, 10, 10, 22, 35}));
  EXPECT_EQ(plan.chunks[0].starts, (Lengths{0, 0, 0, 0}));
  EXPECT_EQ(plan.chunks[1].cu_seqlens_k, (Lengths{0, 0, 0, 0, 17}));
  EXPECT_EQ(plan.chunks[1].starts[3], 13);
  EXPECT_EQ(plan.chunks[0].max_seqlen_k, 13);
  EXPECT_EQ(plan.chunks[1].max_seqlen_k, 17);
  EXPECT_EQ(plan.chunk_size, (std::vector<std::int64_t>{35, 17}));
  check_context_plan(plan, context);
  expect_covers(context, plan, 35, 1);
  EXPECT_TRUE(pack_context_chunks({0, 0}, 8).chunks.empty());
}

TEST(ContextPlan, PackedChunksCoverEveryContextForEveryBudget) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    Lengths context(1 + rng() % 6);
    for (auto& length : context) length = static_cast<std::int32_t>(rng() % 3 == 0 ? 0 : rng() % 300);
    const std::int64_t total = std::accumulate(context.begin(), context.end(), std::int64_t{0});
    for (std::int64_t workspace : {std::int64_t{1}, std::int64_t{7}, total / 3 + 1, total + 1}) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " workspace " + std::to_string(workspace));
      const ContextPlan plan = pack_context_chunks(context, workspace);
      expect_covers(context, plan, workspace, 1);
      EXPECT_NO_THROW(check_context_plan(plan, context));
      // Every chunk but the last is full.
      for (std::size_t c = 0; c + 1 < plan.chunks.size(); ++c) EXPECT_EQ(plan.chunks[c].num_tokens(), workspace);
    }
  }
}

TEST(ContextPlan, ACheckedPlanCoversEveryTokenOnce) {
  const Lengths context{10, 0, 12, 30};
  const ContextPlan good = pack_context_chunks(context, 35);
  const auto message = [&](const ContextPlan& plan) {
    return invalid_argument_message([&] { check_context_plan(plan, context); });
  };
  EXPECT_EQ(message(good), "no error");
  ContextPlan twice = good;
  twice.chunks[1].starts[3] = 12;
  EXPECT_EQ(message(twice), "the context chunks cover twice context token 12 of sequence 3");
  ContextPlan missing = good;
  missing.chunks.pop_back();
  EXPECT_EQ(message(missing), "the context chunks miss context token 13 of sequence 3");
  ContextPlan outside = good;
  outside.chunks[1].starts[3] = 14;
  EXPECT_EQ(message(outside), "context chunk 1: sequence 3's tokens [14, 31) are not inside its 30 context tokens");
  ContextPlan short_batch = good;
  short_batch.chunks[0].starts.pop_back();
  EXPECT_EQ(message(short_batch), "context chunk 0 has 3 starts and 5 cu_seqlens_k entries; the step has 4 sequences");
  EXPECT_EQ(message(ContextPlan{}), "the context chunks miss context token 0 of sequence 0");
}

}  // namespace
}  // namespace mla
