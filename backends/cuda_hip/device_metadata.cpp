#include "device_metadata.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla::gpu {

static_assert(sizeof(WorkItem) == 2 * sizeof(std::int32_t), "work items are packed as two 32-bit words");

namespace {

std::size_t append(std::vector<std::int32_t>& words, const std::vector<std::int32_t>& values) {
  const std::size_t offset = words.size();
  words.insert(words.end(), values.begin(), values.end());
  return offset;
}

PlannedPhase append_phase(std::vector<std::int32_t>& words, const std::vector<std::int32_t>& cu_q,
                          std::size_t cu_q_offset, const std::vector<std::int32_t>& cu_k, bool causal, TileShape tile) {
  PlannedPhase phase;
  phase.cu_q = cu_q_offset;
  phase.cu_k = append(words, cu_k);
  phase.causal = causal;
  for (std::size_t i = 0; i + 1 < cu_k.size(); ++i)
    phase.max_seqlen_k = std::max(phase.max_seqlen_k, cu_k[i + 1] - cu_k[i]);
  const std::vector<WorkItem> work = build_work_list(cu_q, cu_k, causal, tile);
  phase.work = words.size();
  phase.num_work = static_cast<std::int32_t>(work.size());
  for (const WorkItem& item : work) {
    words.push_back(item.seq);
    words.push_back(item.q_tile);
  }
  return phase;
}

}  // namespace

std::vector<std::int32_t> plan_phases(const PrefillMetadata& metadata, TileShape tile, FlashPlan& plan) {
  if (tile.rows < min_planned_query_tile_rows) {
    raise(ErrorCategory::internal, "flash plan: a query tile of " + std::to_string(tile.rows) +
                                       " rows is below min_planned_query_tile_rows, which sizes the steps' workspace");
  }
  std::vector<std::int32_t> words;
  plan.phases.clear();
  const std::size_t cu_q = append(words, metadata.cu_seqlens_q);
  plan.phases.push_back(append_phase(words, metadata.cu_seqlens_q, cu_q, metadata.cu_seqlens_k, metadata.causal, tile));
  for (const PrefillMetadata::Chunk& chunk : metadata.chunks) {
    plan.phases.push_back(append_phase(words, metadata.cu_seqlens_q, cu_q, chunk.cu_seqlens_k, false, tile));
  }
  // §12's positions of every phase, for masked calls: [B] queries, [B] keys.
  for (std::size_t index = 0; index < plan.phases.size(); ++index) {
    const MaskPositions positions = mask_positions(metadata, static_cast<int>(index) - 1);
    plan.phases[index].positions = words.size();
    for (const std::vector<std::int64_t>* values : {&positions.query, &positions.key}) {
      for (const std::int64_t value : *values) {
        if (value > INT32_MAX) {
          raise(ErrorCategory::invalid_argument,
                "flash plan: a sequence's whole key range passes 2^31 positions, past what the kernels index");
        }
        words.push_back(static_cast<std::int32_t>(value));
      }
    }
  }
  return words;
}

void bind_phases(const DevicePrefillMetadata& metadata, TileShape tile, FlashPlan& plan) {
  const std::int64_t tiles = ceil_div(metadata.max_seqlen_q, tile.rows);
  const std::int64_t items = tiles * metadata.batch_size;
  if (items > INT32_MAX) {
    raise(ErrorCategory::invalid_argument, "device metadata: " + std::to_string(metadata.batch_size) +
                                               " sequences of up to " + std::to_string(metadata.max_seqlen_q) +
                                               " queries need more thread blocks than one launch has");
  }
  const auto phase = [&](const std::int32_t* cu_k, bool causal, int max_seqlen_k) {
    PlannedPhase p;
    p.bound_cu_q = metadata.cu_seqlens_q;
    p.bound_cu_k = cu_k;
    p.max_seqlen_k = max_seqlen_k;
    p.num_work = static_cast<std::int32_t>(items);
    p.tiles_per_seq = static_cast<std::int32_t>(tiles);
    p.causal = causal;
    return p;
  };
  plan.phases.clear();
  plan.phases.push_back(phase(metadata.cu_seqlens_k, metadata.causal, metadata.max_seqlen_k));
  for (const DevicePrefillMetadata::Chunk& chunk : metadata.chunks) {
    plan.phases.push_back(phase(chunk.cu_seqlens_k, false, chunk.max_seqlen_k));
  }
}

DevicePhase FlashPlan::resolve(std::size_t index, const void* workspace) const {
  const PlannedPhase& planned = phases.at(index);
  DevicePhase phase;
  phase.num_work = planned.num_work;
  phase.tiles_per_seq = planned.tiles_per_seq;
  phase.causal = planned.causal;
  phase.max_seqlen_k = planned.max_seqlen_k;
  if (planned.bound_cu_q != nullptr) {
    phase.cu_seqlens_q = planned.bound_cu_q;
    phase.cu_seqlens_k = planned.bound_cu_k;
    return phase;
  }
  const auto* base = static_cast<const std::int32_t*>(workspace);
  phase.cu_seqlens_q = base + planned.cu_q;
  phase.cu_seqlens_k = base + planned.cu_k;
  phase.work = reinterpret_cast<const WorkItem*>(base + planned.work);
  phase.positions = base + planned.positions;
  return phase;
}

}  // namespace mla::gpu
