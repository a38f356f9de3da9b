// A prefill step's metadata on the device: cu_seqlens of the new tokens and of
// every context chunk, and one heaviest-first work list per phase. Built and
// uploaded once per step in prepare(), with one copy through the step's queue;
// the kernels then read everything from device memory.
#pragma once

#include <cstdint>
#include <vector>

#include "mla/backend.hpp"
#include "mla/queue.hpp"
#include "work_schedule.hpp"

namespace mla::gpu {

// What one kernel launch needs to find its sequences; device pointers.
struct DevicePhase {
  const std::int32_t* cu_seqlens_q = nullptr;  // [B+1]
  const std::int32_t* cu_seqlens_k = nullptr;  // [B+1]
  const WorkItem* work = nullptr;              // [num_work], heaviest first; null: tiles_per_seq
  std::int32_t num_work = 0;
  std::int32_t tiles_per_seq = 0;  // without a work list (gpu::work_item)
  bool causal = false;
  int max_seqlen_k = 0;  // at least the longest sequence's keys: bounds the key tiles of a block
};

class DeviceMetadata {
 public:
  // Plans the new-token phase (metadata.causal) and every chunk (non-causal)
  // with `tile`, and copies the result to device memory of `queue`.
  // `metadata` must have passed check_metadata. With `reuse`, the caller
  // promises that every kernel that read the previous upload was enqueued on
  // `queue`'s stream, so the copy may overwrite that buffer in stream order
  // when it is large enough: a steady stream of steps then allocates nothing.
  void upload(Queue& queue, const PrefillMetadata& metadata, TileShape tile, bool reuse = false);

  // Uses the caller's arrays where they are (device metadata): no work
  // lists, no copy, no allocation. The kernels cover max_seqlen_q tiles of
  // every sequence and skip the empty ones.
  void bind(Queue& queue, const DevicePrefillMetadata& metadata, TileShape tile);

  bool uploaded() const { return bound_ || static_cast<bool>(buffer_); }
  DevicePhase new_tokens() const;
  // Raises Error(invalid_argument) for an index outside [0, num_chunks()).
  DevicePhase chunk(int index) const;
  int num_chunks() const { return static_cast<int>(bound_ ? bound_phases_.size() - 1 : chunk_offsets_.size()); }
  TileShape tile() const { return tile_; }
  // Device and backend of the queue the data lives on.
  DeviceBackend backend() const { return backend_; }
  int device_index() const { return device_index_; }

  // The planned host copy, for tests and diagnostics.
  const std::vector<std::int32_t>& host_words() const { return words_; }

 private:
  struct PhaseOffsets {
    std::size_t cu_q = 0;  // in 32-bit words from the start of the buffer
    std::size_t cu_k = 0;
    std::size_t work = 0;
    std::int32_t num_work = 0;
    bool causal = false;
    int max_seqlen_k = 0;
  };
  std::size_t append(const std::vector<std::int32_t>& values);
  PhaseOffsets append_phase(const std::vector<std::int32_t>& cu_q, const std::size_t cu_q_offset,
                            const std::vector<std::int32_t>& cu_k, bool causal);
  DevicePhase resolve(const PhaseOffsets& offsets) const;

  // The host words stay alive with the device copy: the copy is asynchronous.
  std::vector<std::int32_t> words_;
  UsmBuffer buffer_;
  PhaseOffsets new_tokens_;
  std::vector<PhaseOffsets> chunk_offsets_;
  TileShape tile_;
  DeviceBackend backend_ = DeviceBackend::host;
  int device_index_ = 0;
  // bind(): the phases point at the caller's arrays.
  bool bound_ = false;
  std::vector<DevicePhase> bound_phases_;  // new tokens, then every chunk
};

}  // namespace mla::gpu
