// A flash plan's device metadata: where each phase's cu_seqlens and
// heaviest-first work list lie. Planned on the host from host metadata (the
// words go to the start of the plan's workspace, one copy per step), or bound
// to the caller's device arrays (device metadata: no words, no work lists).
// The kernels then read everything from device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_hip/kernel_choice.hpp"
#include "mla/backend.hpp"
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
  // [2B]: §12's position of each sequence's query 0, then of the phase's
  // key 0 (gpu::KernelMask::positions); null for device metadata.
  const std::int32_t* positions = nullptr;
};

// One phase as planned: word offsets into the workspace (planned from host
// metadata) or the caller's arrays (bound to device metadata).
struct PlannedPhase {
  std::size_t cu_q = 0;  // 32-bit words from the start of the workspace
  std::size_t cu_k = 0;
  std::size_t work = 0;
  std::size_t positions = 0;
  const std::int32_t* bound_cu_q = nullptr;  // set: device metadata, no work list
  const std::int32_t* bound_cu_k = nullptr;
  std::int32_t num_work = 0;
  std::int32_t tiles_per_seq = 0;
  bool causal = false;
  int max_seqlen_k = 0;
  int splits = 1;  // split-KV ranges of the launch (1: one pass)
};

// The flash backends' part of an AttentionPlan.
struct FlashPlan final : PlanDetail {
  KernelTile kernel;                 // the chooser's tile for the plan's device
  std::vector<PlannedPhase> phases;  // the new tokens, then every chunk
  std::size_t scratch_offset = 0;    // bytes from the workspace start to the split partials

  // The launch's view of phase `index` over the workspace the words were
  // uploaded to.
  DevicePhase resolve(std::size_t index, const void* workspace) const;
};

// Plans the new-token phase (metadata.causal) and every chunk (non-causal)
// with `tile` into `plan` and returns the words to upload: cu_q, each
// phase's cu_k and work list, then each phase's mask positions. `metadata` must
// have passed check_metadata.
std::vector<std::int32_t> plan_phases(const PrefillMetadata& metadata, TileShape tile, FlashPlan& plan);

// Points every phase at the caller's arrays: no words, no work lists. The
// kernels cover max_seqlen_q tiles of every sequence and skip the empty ones.
void bind_phases(const DevicePrefillMetadata& metadata, TileShape tile, FlashPlan& plan);

}  // namespace mla::gpu
