// The key ranges a query tile visits and the heaviest-first work list,
// checked against brute force over every row and key.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "cuda_hip/work_schedule.hpp"
#include "mla/error.hpp"

namespace mla::gpu {
namespace {

bool visible(int row, int key, int seqlen_q, int seqlen_k, bool causal) {
  if (key >= seqlen_k) return false;
  return !causal || key <= row + seqlen_k - seqlen_q;  // bottom-right aligned
}

TEST(WorkSchedule, CausalKeyEndIsBottomRightAligned) {
  EXPECT_EQ(numeric::causal_key_end(0, 5, 5, true), 1);
  EXPECT_EQ(numeric::causal_key_end(4, 5, 5, true), 5);
  EXPECT_EQ(numeric::causal_key_end(0, 3, 10, true), 8);  // more keys than queries: the first row sees 8
  EXPECT_EQ(numeric::causal_key_end(0, 10, 3, true), 0);  // more queries than keys: the first rows see none
  EXPECT_EQ(numeric::causal_key_end(7, 10, 3, true), 1);
  EXPECT_EQ(numeric::causal_key_end(3, 10, 3, false), 3);
}

TEST(WorkSchedule, TileBoundsMatchBruteForce) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 300);
  const TileShape shapes[] = {{128, 64}, {64, 32}, {16, 16}};
  for (int trial = 0; trial < 400; ++trial) {
    const int seqlen_q = 1 + length(rng);
    const int seqlen_k = length(rng);
    const bool causal = trial % 2 == 0;
    const TileShape tile = shapes[trial % 3];
    for (int q_tile = 0; q_tile * tile.rows < seqlen_q; ++q_tile) {
      const int begin = q_tile * tile.rows;
      const int end = std::min(seqlen_q, begin + tile.rows);
      int any_end = 0;         // keys some row sees
      int all_end = seqlen_k;  // keys every row sees (a prefix)
      for (int row = begin; row < end; ++row) {
        int row_end = 0;
        for (int key = 0; key < seqlen_k; ++key) {
          if (visible(row, key, seqlen_q, seqlen_k, causal)) row_end = key + 1;
        }
        EXPECT_EQ(numeric::causal_key_end(row, seqlen_q, seqlen_k, causal), row_end);
        any_end = std::max(any_end, row_end);
        all_end = std::min(all_end, row_end);
      }
      const int tiles = key_tiles(q_tile, seqlen_q, seqlen_k, causal, tile);
      EXPECT_EQ(tiles, (any_end + tile.cols - 1) / tile.cols) << seqlen_q << " " << seqlen_k << " " << q_tile;
      const int unmasked = unmasked_key_tiles(q_tile, seqlen_q, seqlen_k, causal, tile);
      EXPECT_EQ(unmasked, all_end / tile.cols);
      EXPECT_LE(unmasked, tiles);
    }
  }
}

TEST(WorkSchedule, CoversEveryTileOnceHeaviestFirst) {
  // Odd lengths, an empty sequence, a sequence without keys, more keys than queries.
  const std::vector<std::int32_t> cu_q = {0, 1000, 1000, 1097, 1114, 1631};
  const std::vector<std::int32_t> cu_k = {0, 1000, 1000, 1097, 1097, 2614};
  const TileShape tile{128, 64};
  for (bool causal : {true, false}) {
    const std::vector<WorkItem> items = build_work_list(cu_q, cu_k, causal, tile);
    std::set<std::pair<int, int>> seen;
    int previous = INT32_MAX;
    for (const WorkItem& item : items) {
      EXPECT_TRUE(seen.insert({item.seq, item.q_tile}).second) << "duplicate item";
      const int seqlen_q = cu_q[item.seq + 1] - cu_q[item.seq];
      const int seqlen_k = cu_k[item.seq + 1] - cu_k[item.seq];
      ASSERT_LT(item.q_tile * tile.rows, seqlen_q);
      const int tiles = key_tiles(item.q_tile, seqlen_q, seqlen_k, causal, tile);
      EXPECT_LE(tiles, previous) << "not sorted by work";
      previous = tiles;
    }
    std::size_t expected = 0;
    for (std::size_t s = 0; s + 1 < cu_q.size(); ++s) expected += (cu_q[s + 1] - cu_q[s] + tile.rows - 1) / tile.rows;
    EXPECT_EQ(items.size(), expected);
    // The sequence without keys still has its item (it writes 0 and -inf).
    EXPECT_EQ(seen.count({3, 0}), 1u);
    EXPECT_EQ(seen.count({1, 0}), 0u);
  }
}

TEST(WorkSchedule, CausalSingleSequenceRunsLastTileFirst) {
  const std::vector<WorkItem> items = build_work_list({0, 1000}, {0, 1000}, true, TileShape{128, 64});
  ASSERT_EQ(items.size(), 8u);
  for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(items[i].q_tile, 7 - static_cast<int>(i));
}

TEST(WorkSchedule, HeadGroupsCoverEveryBlockOnceGroupByGroup) {
  const int num_work = 5;
  const int num_heads = 12;
  for (const int group : {0, 1, 2, 3, 4, 6, 12}) {
    std::set<std::pair<int, int>> seen;
    for (int block = 0; block < num_work * num_heads; ++block) {
      const HeadTile t = head_tile(block, num_work, num_heads, group);
      ASSERT_TRUE(t.work >= 0 && t.work < num_work && t.head >= 0 && t.head < num_heads) << group << " " << block;
      EXPECT_TRUE(seen.insert({t.work, t.head}).second) << "group " << group << " block " << block;
      if (group > 0 && group < num_heads) {
        // A group's blocks are consecutive; within it the heads run fastest.
        EXPECT_EQ(t.head / group, block / (num_work * group)) << group << " " << block;
        EXPECT_EQ(t.head % group, block % group) << group << " " << block;
        EXPECT_EQ(t.work, (block % (num_work * group)) / group) << group << " " << block;
      } else {
        EXPECT_EQ(t.work, block / num_heads);  // every head of a work item before the next item
        EXPECT_EQ(t.head, block % num_heads);
      }
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(num_work * num_heads)) << group;
  }
}

TEST(WorkSchedule, RejectsMismatchedBatches) {
  EXPECT_THROW(build_work_list({0, 4}, {0, 4, 8}, true, TileShape{128, 64}), Error);
  EXPECT_THROW(build_work_list({0, 4}, {0, 4}, true, TileShape{0, 64}), Error);
}

}  // namespace
}  // namespace mla::gpu
