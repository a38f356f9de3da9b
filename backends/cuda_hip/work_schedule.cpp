#include "work_schedule.hpp"

#include <algorithm>
#include <string>

#include "mla/error.hpp"

namespace mla::gpu {

std::vector<WorkItem> build_work_list(const std::vector<std::int32_t>& cu_seqlens_q,
                                      const std::vector<std::int32_t>& cu_seqlens_k, bool causal, TileShape tile) {
  if (tile.rows <= 0 || tile.cols <= 0) {
    raise(ErrorCategory::internal, "build_work_list: tile shape must be positive");
  }
  if (cu_seqlens_q.size() != cu_seqlens_k.size() || cu_seqlens_q.empty()) {
    raise(ErrorCategory::invalid_argument, "build_work_list: cu_seqlens_q has " + std::to_string(cu_seqlens_q.size()) +
                                               " entries, cu_seqlens_k " + std::to_string(cu_seqlens_k.size()));
  }
  struct Weighted {
    WorkItem item;
    int tiles;
  };
  std::vector<Weighted> weighted;
  for (std::size_t seq = 0; seq + 1 < cu_seqlens_q.size(); ++seq) {
    const int seqlen_q = cu_seqlens_q[seq + 1] - cu_seqlens_q[seq];
    const int seqlen_k = cu_seqlens_k[seq + 1] - cu_seqlens_k[seq];
    const int q_tiles = ceil_div(seqlen_q, tile.rows);
    for (int q_tile = 0; q_tile < q_tiles; ++q_tile) {
      weighted.push_back(
          {{static_cast<std::int32_t>(seq), q_tile}, key_tiles(q_tile, seqlen_q, seqlen_k, causal, tile)});
    }
  }
  std::stable_sort(weighted.begin(), weighted.end(),
                   [](const Weighted& a, const Weighted& b) { return a.tiles > b.tiles; });
  std::vector<WorkItem> items;
  items.reserve(weighted.size());
  for (const Weighted& w : weighted) items.push_back(w.item);
  return items;
}

}  // namespace mla::gpu
