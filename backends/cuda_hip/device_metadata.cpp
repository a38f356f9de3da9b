#include "device_metadata.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "mla/error.hpp"

namespace mla::gpu {

static_assert(sizeof(WorkItem) == 2 * sizeof(std::int32_t), "work items are packed as two 32-bit words");

std::size_t DeviceMetadata::append(const std::vector<std::int32_t>& values) {
  const std::size_t offset = words_.size();
  words_.insert(words_.end(), values.begin(), values.end());
  return offset;
}

DeviceMetadata::PhaseOffsets DeviceMetadata::append_phase(const std::vector<std::int32_t>& cu_q,
                                                          const std::size_t cu_q_offset,
                                                          const std::vector<std::int32_t>& cu_k, bool causal) {
  PhaseOffsets offsets;
  offsets.cu_q = cu_q_offset;
  offsets.cu_k = append(cu_k);
  offsets.causal = causal;
  for (std::size_t i = 0; i + 1 < cu_k.size(); ++i) {
    offsets.max_seqlen_k = std::max(offsets.max_seqlen_k, cu_k[i + 1] - cu_k[i]);
  }
  const std::vector<WorkItem> work = build_work_list(cu_q, cu_k, causal, tile_);
  offsets.work = words_.size();
  offsets.num_work = static_cast<std::int32_t>(work.size());
  for (const WorkItem& item : work) {
    words_.push_back(item.seq);
    words_.push_back(item.q_tile);
  }
  return offsets;
}

void DeviceMetadata::bind(Queue& queue, const DevicePrefillMetadata& metadata, TileShape tile) {
  tile_ = tile;
  backend_ = queue.backend();
  device_index_ = queue.device_index();
  const std::int64_t tiles = ceil_div(metadata.max_seqlen_q, tile.rows);
  const std::int64_t items = tiles * metadata.batch_size;
  if (items > INT32_MAX) {
    raise(ErrorCategory::invalid_argument, "device metadata: " + std::to_string(metadata.batch_size) +
                                               " sequences of up to " + std::to_string(metadata.max_seqlen_q) +
                                               " queries need more thread blocks than one launch has");
  }
  const auto phase = [&](const std::int32_t* cu_k, bool causal, int max_seqlen_k) {
    DevicePhase p;
    p.max_seqlen_k = max_seqlen_k;
    p.cu_seqlens_q = metadata.cu_seqlens_q;
    p.cu_seqlens_k = cu_k;
    p.num_work = static_cast<std::int32_t>(items);
    p.tiles_per_seq = static_cast<std::int32_t>(tiles);
    p.causal = causal;
    return p;
  };
  bound_phases_.clear();
  bound_phases_.push_back(phase(metadata.cu_seqlens_k, metadata.causal, metadata.max_seqlen_k));
  for (const DevicePrefillMetadata::Chunk& chunk : metadata.chunks)
    bound_phases_.push_back(phase(chunk.cu_seqlens_k, false, chunk.max_seqlen_k));
  chunk_offsets_.clear();
  words_.clear();
  bound_ = true;
}

void DeviceMetadata::upload(Queue& queue, const PrefillMetadata& metadata, TileShape tile, bool reuse) {
  bound_ = false;
  bound_phases_.clear();
  const DeviceBackend previous_backend = backend_;
  const int previous_device = device_index_;
  words_.clear();
  chunk_offsets_.clear();
  tile_ = tile;
  backend_ = queue.backend();
  device_index_ = queue.device_index();
  const std::size_t cu_q = append(metadata.cu_seqlens_q);
  new_tokens_ = append_phase(metadata.cu_seqlens_q, cu_q, metadata.cu_seqlens_k, metadata.causal);
  for (const PrefillMetadata::Chunk& chunk : metadata.chunks) {
    chunk_offsets_.push_back(append_phase(metadata.cu_seqlens_q, cu_q, chunk.cu_seqlens_k, false));
  }
  // words_ is never empty: cu_seqlens_q has at least one entry.
  const std::size_t bytes = words_.size() * sizeof(std::int32_t);
  const bool fits =
      buffer_ && buffer_.bytes() >= bytes && backend_ == previous_backend && device_index_ == previous_device;
  if (!(reuse && fits)) {
    // Kernels in flight on another stream may still read the old buffer;
    // freeing it waits for them (cudaFree / hipFree synchronise).
    buffer_ = UsmBuffer();
    buffer_ = UsmBuffer::device(queue, bytes);
  }
  // An asynchronous copy from pageable memory returns once the runtime has
  // staged the source, so words_ may be rebuilt by the next upload.
  queue.memcpy(buffer_.get(), words_.data(), bytes);
}

DevicePhase DeviceMetadata::resolve(const PhaseOffsets& offsets) const {
  if (!uploaded()) raise(ErrorCategory::invalid_argument, "device metadata used before prepare()");
  const auto* base = buffer_.as<const std::int32_t>();
  DevicePhase phase;
  phase.cu_seqlens_q = base + offsets.cu_q;
  phase.cu_seqlens_k = base + offsets.cu_k;
  phase.work = reinterpret_cast<const WorkItem*>(base + offsets.work);
  phase.num_work = offsets.num_work;
  phase.causal = offsets.causal;
  phase.max_seqlen_k = offsets.max_seqlen_k;
  return phase;
}

DevicePhase DeviceMetadata::new_tokens() const { return bound_ ? bound_phases_.front() : resolve(new_tokens_); }

DevicePhase DeviceMetadata::chunk(int index) const {
  if (index < 0 || index >= num_chunks()) {
    raise(ErrorCategory::invalid_argument, "context chunk " + std::to_string(index) + " does not exist: the step has " +
                                               std::to_string(num_chunks()) + " chunk(s)");
  }
  if (bound_) return bound_phases_[static_cast<std::size_t>(index) + 1];
  return resolve(chunk_offsets_[static_cast<std::size_t>(index)]);
}

}  // namespace mla::gpu
