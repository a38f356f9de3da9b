// The host side of docs/contract.md §12: whole key ranges, where a call's
// rows and keys lie in them, mask word counts and masks built from index
// lists (vLLM's topk_indices), with every refusal.
#include "mla/attention_mask.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

// Two sequences: 3 and 2 new tokens, 4 and 6 new-token keys (bottom-right),
// context chunks of {5, 0} and {2, 7} keys.
PrefillMetadata two_sequences() {
  PrefillMetadata meta = PrefillMetadata::from_lengths({3, 2}, {4, 6});
  meta.add_chunk({5, 0});
  meta.add_chunk({2, 7});
  return meta;
}

TEST(AttentionMask, WholeKeyRangesAddEveryChunkToTheNewKeys) {
  EXPECT_EQ(whole_key_lengths(two_sequences()), (std::vector<std::int64_t>{11, 13}));
}

TEST(AttentionMask, PositionsOfQueriesAndOfEachCallsKeys) {
  const PrefillMetadata meta = two_sequences();
  // Query 0 of sequence 0 is at 7 + 4 - 3 = 8: it sees positions 0..8.
  const MaskPositions fresh = mask_positions(meta, -1);
  EXPECT_EQ(fresh.query, (std::vector<std::int64_t>{8, 11}));
  EXPECT_EQ(fresh.key, (std::vector<std::int64_t>{7, 7}));
  const MaskPositions first = mask_positions(meta, 0);
  EXPECT_EQ(first.query, fresh.query);
  EXPECT_EQ(first.key, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(mask_positions(meta, 1).key, (std::vector<std::int64_t>{5, 0}));
}

TEST(AttentionMask, WordsPerRowRoundAsVllmDoes) {
  EXPECT_EQ(topk_mask_words(0), 4);
  EXPECT_EQ(topk_mask_words(1), 4);
  EXPECT_EQ(topk_mask_words(128), 4);
  EXPECT_EQ(topk_mask_words(129), 8);
  EXPECT_EQ(topk_mask_words(8192), 256);
}

TEST(AttentionMask, IndexListsSetExactlyTheirBits) {
  const PrefillMetadata meta = two_sequences();
  // k = 3 slots per token, row stride 4; -1 is no key.
  const std::vector<std::int32_t> indices{
      0,  10, -1, 99,  // token 0 (sequence 0, row 0); 99 is past k and never read
      5,  5,  -1, 0,   // token 1
      -1, -1, -1, 0,   // token 2: no key
      12, 0,  31, 0,   // token 3 (sequence 1, row 0): 31 is out of range
      3,  4,  5,  0,   // token 4
  };
  std::string message;
  try {
    HostTopkMask::from_indices(meta, indices.data(), 3, 4);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
    message = error.what();
  }
  EXPECT_NE(message.find("top-k index 2 of token 3 (sequence 1) is 31, outside [0, 13)"), std::string::npos) << message;

  std::vector<std::int32_t> fixed = indices;
  fixed[14] = 12;
  const HostTopkMask mask = HostTopkMask::from_indices(meta, fixed.data(), 3, 4);
  const TopkMask view = mask.view();
  EXPECT_EQ(view.batch_size, 2);
  EXPECT_EQ(view.rows, 3);
  EXPECT_EQ(view.words_per_row, 4);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(view.words) % 64, 0u);
  for (std::int64_t p = 0; p < 13; ++p) {
    EXPECT_EQ(mask.allows(0, 0, p), p == 0 || p == 10) << p;
    EXPECT_EQ(mask.allows(0, 1, p), p == 5) << p;
    EXPECT_FALSE(mask.allows(0, 2, p)) << p;
    EXPECT_EQ(mask.allows(1, 0, p), p == 0 || p == 12) << p;
    EXPECT_EQ(mask.allows(1, 1, p), p >= 3 && p <= 5) << p;
  }
  // The words themselves, as vLLM reads them: bit p & 31 of word p >> 5.
  EXPECT_EQ(view.words[0], (1u << 0) | (1u << 10));
  EXPECT_EQ(view.words[view.batch_stride + view.row_stride], (1u << 3) | (1u << 4) | (1u << 5));
}

TEST(AttentionMask, NegativeIndicesOtherThanMinusOneAndBadListsAreRefused) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths({1}, {40});
  const std::vector<std::int32_t> minus_two{-2};
  EXPECT_THROW(HostTopkMask::from_indices(meta, minus_two.data(), 1, 1), Error);
  EXPECT_THROW(HostTopkMask::from_indices(meta, nullptr, 1, 1), Error);
  EXPECT_THROW(HostTopkMask::from_indices(meta, minus_two.data(), 2, 1), Error);  // stride below k
  HostTopkMask empty(meta);
  EXPECT_THROW(empty.allow(0, 0, 40), Error);
  EXPECT_THROW(empty.allow(0, 1, 0), Error);
  EXPECT_THROW(empty.allow(1, 0, 0), Error);
  empty.allow(0, 0, 39);
  EXPECT_TRUE(empty.allows(0, 0, 39));
  EXPECT_EQ(empty.view().words[1], 1u << 7);
}

}  // namespace
}  // namespace mla
