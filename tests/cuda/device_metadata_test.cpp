// A flash plan's device metadata: the words planned from host metadata, read
// through FlashPlan::resolve from a copy the test can read back, and the
// phases bound to device metadata.
#include <gtest/gtest.h>

#include "cuda_hip/device_metadata.hpp"
#include "mla/error.hpp"

namespace mla::gpu {
namespace {

std::vector<std::int32_t> read(const std::int32_t* data, std::size_t count) { return {data, data + count}; }

TEST(DeviceMetadata, PlansEveryPhase) {
  PrefillMetadata metadata = PrefillMetadata::from_lengths({97, 0, 300}, {97, 0, 514}, true);
  metadata.add_chunk({17, 5, 0});
  metadata.add_chunk({2048, 0, 1});
  const TileShape tile{64, 32};
  FlashPlan plan;
  const std::vector<std::int32_t> words = plan_phases(metadata, tile, plan);
  ASSERT_EQ(plan.phases.size(), 3u);
  // The steps size the words at the smallest tile: never fewer than planned.
  BackendParams params;
  EXPECT_LE(words.size() * sizeof(std::int32_t), attention_workspace_size(params, metadata));
  EXPECT_THROW(plan.resolve(3, words.data()), std::out_of_range);

  const DevicePhase phase = plan.resolve(0, words.data());
  EXPECT_TRUE(phase.causal);
  EXPECT_EQ(phase.max_seqlen_k, 514);
  EXPECT_EQ(read(phase.cu_seqlens_q, 4), metadata.cu_seqlens_q);
  EXPECT_EQ(read(phase.cu_seqlens_k, 4), metadata.cu_seqlens_k);
  const auto expected_work = build_work_list(metadata.cu_seqlens_q, metadata.cu_seqlens_k, true, tile);
  ASSERT_EQ(phase.num_work, static_cast<int>(expected_work.size()));
  for (std::size_t i = 0; i < expected_work.size(); ++i) {
    EXPECT_EQ(phase.work[i].seq, expected_work[i].seq);
    EXPECT_EQ(phase.work[i].q_tile, expected_work[i].q_tile);
  }
  for (std::size_t c = 0; c < 2; ++c) {
    const DevicePhase chunk = plan.resolve(c + 1, words.data());
    EXPECT_FALSE(chunk.causal);
    EXPECT_EQ(read(chunk.cu_seqlens_q, 4), metadata.cu_seqlens_q);
    EXPECT_EQ(read(chunk.cu_seqlens_k, 4), metadata.chunks[c].cu_seqlens_k);
    const auto chunk_work = build_work_list(metadata.cu_seqlens_q, metadata.chunks[c].cu_seqlens_k, false, tile);
    EXPECT_EQ(chunk.num_work, static_cast<int>(chunk_work.size()));
  }
}

TEST(DeviceMetadata, BoundPhasesReadTheCallersArrays) {
  const std::vector<std::int32_t> cu_q{0, 5, 11}, cu_k{0, 7, 20}, chunk_k{0, 3, 3};
  DevicePrefillMetadata metadata;
  metadata.batch_size = 2;
  metadata.cu_seqlens_q = cu_q.data();
  metadata.cu_seqlens_k = cu_k.data();
  metadata.num_q_tokens = 11;
  metadata.num_k_tokens = 20;
  metadata.max_seqlen_q = 6;
  metadata.max_seqlen_k = 13;
  metadata.chunks.push_back({chunk_k.data(), 3, 3});
  FlashPlan plan;
  bind_phases(metadata, TileShape{4, 16}, plan);
  ASSERT_EQ(plan.phases.size(), 2u);
  const DevicePhase phase = plan.resolve(0, nullptr);
  EXPECT_EQ(phase.cu_seqlens_q, cu_q.data());
  EXPECT_EQ(phase.cu_seqlens_k, cu_k.data());
  EXPECT_EQ(phase.work, nullptr);
  EXPECT_EQ(phase.tiles_per_seq, 2);
  EXPECT_EQ(phase.num_work, 4);
  const DevicePhase chunk = plan.resolve(1, nullptr);
  EXPECT_EQ(chunk.cu_seqlens_k, chunk_k.data());
  EXPECT_FALSE(chunk.causal);
  EXPECT_EQ(chunk.max_seqlen_k, 3);
}

TEST(DeviceMetadata, TilesBelowTheSizingTileAreRefused) {
  FlashPlan plan;
  EXPECT_THROW(plan_phases(PrefillMetadata::from_lengths({5}, {5}, true), TileShape{8, 16}, plan), Error);
}

}  // namespace
}  // namespace mla::gpu
