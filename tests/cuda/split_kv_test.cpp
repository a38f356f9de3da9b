// Split-KV planning (backends/cuda_hip/split_kv.hpp): the split count from
// blocks, key tiles, multiprocessors and lent scratch; the key ranges of the
// splits; and that the scratch the step workspaces reserve
// (mla::attention_scratch_size) holds the splits the planner may choose.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cuda_hip/split_kv.hpp"
#include "cuda_hip/work_schedule.hpp"
#include "mla/backend.hpp"
#include "mla/error.hpp"

namespace mla::gpu {
namespace {

SplitRequest request(std::int64_t blocks, int key_tiles, int multiprocessors) {
  SplitRequest r;
  r.blocks = blocks;
  r.key_tiles = key_tiles;
  r.multiprocessors = multiprocessors;
  r.rows = 16 * 3;  // 16 tokens, 3 heads
  r.v_head_dim = 128;
  r.scratch_bytes = split_scratch_bytes(max_kv_splits, r.rows, r.v_head_dim);
  r.max_splits = max_kv_splits;
  return r;
}

TEST(SplitKv, FewBlocksOnManyMultiprocessorsSplitByWaveEfficiency) {
  // 3 blocks on 132 SMs, 300 key tiles: efficiency 3s/132 rises to s = 16;
  // the fewest splits within 85% of it is 14.
  EXPECT_EQ(choose_kv_splits(request(3, 300, 132)).splits, 14);
  // 40 blocks on 132: s = 3 fills 120/132 = 0.91 of a wave, within 85% of the best (s = 13, 0.98).
  EXPECT_EQ(choose_kv_splits(request(40, 300, 132)).splits, 3);
}

TEST(SplitKv, NoSplitWhenTheBlocksFillTheDeviceOrThereIsNothingToSplit) {
  EXPECT_EQ(choose_kv_splits(request(106, 300, 132)).splits, 1);  // 80% of 132
  EXPECT_GE(choose_kv_splits(request(105, 300, 132)).splits, 2);
  EXPECT_EQ(choose_kv_splits(request(3, 1, 132)).splits, 1);    // one key tile
  EXPECT_EQ(choose_kv_splits(request(3, 300, 0)).splits, 1);    // unknown device (the emulator's host queue)
  EXPECT_EQ(choose_kv_splits(request(0, 300, 132)).splits, 1);  // empty launch
  EXPECT_EQ(choose_kv_splits(request(3, 3, 132)).splits, 3);    // never more splits than key tiles
}

TEST(SplitKv, TheScratchCapsTheSplits) {
  SplitRequest r = request(3, 300, 132);
  r.scratch_bytes = 0;
  EXPECT_EQ(choose_kv_splits(r).splits, 1);
  r.scratch_bytes = split_scratch_bytes(2, r.rows, r.v_head_dim) - 1;
  EXPECT_EQ(choose_kv_splits(r).splits, 1);
  r.scratch_bytes = split_scratch_bytes(5, r.rows, r.v_head_dim);
  const SplitChoice choice = choose_kv_splits(r);
  EXPECT_EQ(choice.splits, 5);
  EXPECT_NE(choice.reason.find("5 splits"), std::string::npos) << choice.reason;
}

TEST(SplitKv, ForcedSplitsReplaceTheHeuristicWithinTheScratch) {
  SplitRequest r = request(500, 300, 132);  // the heuristic would not split
  r.forced = 4;
  EXPECT_EQ(choose_kv_splits(r).splits, 4);
  r.multiprocessors = 0;
  EXPECT_EQ(choose_kv_splits(r).splits, 4);
  r.key_tiles = 3;
  EXPECT_EQ(choose_kv_splits(r).splits, 3);
  r.scratch_bytes = 0;
  EXPECT_EQ(choose_kv_splits(r).splits, 1);
}

TEST(SplitKv, ForcedSplitsComeFromTheEnvironment) {
  ::unsetenv("MLA_KV_SPLITS");
  EXPECT_EQ(forced_kv_splits(16), 0);
  ::setenv("MLA_KV_SPLITS", "7", 1);
  EXPECT_EQ(forced_kv_splits(16), 7);
  for (const char* bad : {"0", "17", "2x", "-1"}) {
    ::setenv("MLA_KV_SPLITS", bad, 1);
    EXPECT_THROW(forced_kv_splits(16), Error) << bad;
  }
  ::unsetenv("MLA_KV_SPLITS");
}

TEST(SplitKv, KeyRangesCoverEveryTileOnceInOrder) {
  for (int key_tiles = 0; key_tiles < 40; ++key_tiles) {
    for (int splits = 1; splits <= 16; ++splits) {
      int next = 0;
      for (int s = 0; s < splits; ++s) {
        const KeyTileRange range = split_key_tiles(key_tiles, s, splits);
        EXPECT_LE(range.begin, range.end);
        if (range.begin == range.end) continue;
        EXPECT_EQ(range.begin, next) << key_tiles << " tiles, split " << s << " of " << splits;
        next = range.end;
      }
      EXPECT_EQ(next, key_tiles) << key_tiles << " tiles in " << splits << " splits";
    }
  }
}

TEST(SplitKv, StepScratchHoldsTheSplitsItAllowsAndNeverShrinks) {
  BackendParams params;
  for (const int heads : {1, 3, 16, 128}) {
    params.num_heads = heads;
    std::size_t previous = 0;
    for (const std::int64_t tokens : {0, 1, 7, 16, 100, 128, 1000, 5000, 100000}) {
      const std::size_t bytes = attention_scratch_size(params, tokens);
      EXPECT_GE(bytes, previous) << heads << " heads, " << tokens << " tokens";
      previous = bytes;
      const std::int64_t rows = tokens * heads;
      if (rows == 0) continue;
      const std::int64_t allowed = std::min<std::int64_t>(max_kv_splits, kv_split_row_budget / rows);
      if (allowed >= 1) {
        EXPECT_LE(split_scratch_bytes(static_cast<int>(allowed), rows, params.dims.v_head_dim), bytes)
            << heads << " heads, " << tokens << " tokens";
      }
      EXPECT_LE(bytes, static_cast<std::size_t>(kv_split_row_budget) * (params.dims.v_head_dim + 1) * 4 + 256);
    }
  }
}

}  // namespace
}  // namespace mla::gpu
