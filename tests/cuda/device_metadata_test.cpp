// The metadata upload, run through the host queue (the same code path a GPU
// queue takes, with memory the test can read back).
#include <gtest/gtest.h>

#include "cuda_hip/device_metadata.hpp"
#include "mla/error.hpp"

namespace mla::gpu {
namespace {

std::vector<std::int32_t> read(const std::int32_t* data, std::size_t count) { return {data, data + count}; }

TEST(DeviceMetadata, UploadsEveryPhase) {
  Queue queue = Queue::host();
  PrefillMetadata metadata = PrefillMetadata::from_lengths({97, 0, 300}, {97, 0, 514}, true);
  metadata.add_chunk({17, 5, 0});
  metadata.add_chunk({2048, 0, 1});
  const TileShape tile{64, 32};
  DeviceMetadata device;
  EXPECT_FALSE(device.uploaded());
  EXPECT_THROW(device.new_tokens(), Error);
  device.upload(queue, metadata, tile);
  ASSERT_TRUE(device.uploaded());
  ASSERT_EQ(device.num_chunks(), 2);

  const DevicePhase phase = device.new_tokens();
  EXPECT_TRUE(phase.causal);
  EXPECT_EQ(read(phase.cu_seqlens_q, 4), metadata.cu_seqlens_q);
  EXPECT_EQ(read(phase.cu_seqlens_k, 4), metadata.cu_seqlens_k);
  const auto expected_work = build_work_list(metadata.cu_seqlens_q, metadata.cu_seqlens_k, true, tile);
  ASSERT_EQ(phase.num_work, static_cast<int>(expected_work.size()));
  for (std::size_t i = 0; i < expected_work.size(); ++i) {
    EXPECT_EQ(phase.work[i].seq, expected_work[i].seq);
    EXPECT_EQ(phase.work[i].q_tile, expected_work[i].q_tile);
  }
  for (int c = 0; c < 2; ++c) {
    const DevicePhase chunk = device.chunk(c);
    EXPECT_FALSE(chunk.causal);
    EXPECT_EQ(read(chunk.cu_seqlens_q, 4), metadata.cu_seqlens_q);
    EXPECT_EQ(read(chunk.cu_seqlens_k, 4), metadata.chunks[static_cast<std::size_t>(c)].cu_seqlens_k);
    const auto chunk_work =
        build_work_list(metadata.cu_seqlens_q, metadata.chunks[static_cast<std::size_t>(c)].cu_seqlens_k, false, tile);
    EXPECT_EQ(chunk.num_work, static_cast<int>(chunk_work.size()));
  }
  EXPECT_THROW(device.chunk(2), Error);
  EXPECT_THROW(device.chunk(-1), Error);
}

TEST(DeviceMetadata, ReuploadReplacesThePreviousStep) {
  Queue queue = Queue::host();
  DeviceMetadata device;
  PrefillMetadata first = PrefillMetadata::from_lengths({300}, {300}, true);
  first.add_chunk({9});
  device.upload(queue, first, TileShape{128, 64});
  device.upload(queue, PrefillMetadata::from_lengths({5, 6}, {5, 6}, false), TileShape{128, 64});
  EXPECT_EQ(device.num_chunks(), 0);
  const DevicePhase phase = device.new_tokens();
  EXPECT_FALSE(phase.causal);
  EXPECT_EQ(phase.num_work, 2);
  EXPECT_EQ(read(phase.cu_seqlens_k, 3), (std::vector<std::int32_t>{0, 5, 11}));
}

}  // namespace
}  // namespace mla::gpu
