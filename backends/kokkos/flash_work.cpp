#include "flash_work.hpp"

#include <algorithm>
#include <cstdint>

#include "mla/detail/numeric.hpp"

namespace mla::kokkos {

// The work list. Items are grouped by (sequence, head), longest group first,
// and within a group ordered by the number of keys they visit, most first.
// Strict longest-first across heads would interleave the heads, so every
// item would stream its head's K/V from memory; grouped, consecutive items
// reread one head's K/V from cache. The list still ends on the shortest
// items of the shortest sequences, which is what dynamic scheduling needs
// to finish without a long straggler.
std::vector<WorkItem> build_work_list(const AttentionProblem& problem, int heads, int rows_q) {
  const auto& cu_q = *problem.cu_q;
  const auto& cu_k = *problem.cu_k;
  struct Costed {
    std::int64_t group_keys;  // keys of the group's longest item
    std::int64_t keys;
    WorkItem item;
  };
  std::vector<Costed> items;
  for (int b = 0; b + 1 < static_cast<int>(cu_q.size()); ++b) {
    const int sq = cu_q[b + 1] - cu_q[b];
    const int sk = cu_k[b + 1] - cu_k[b];
    auto keys_of = [&](int tile) -> std::int64_t {
      const int last = std::min(sq, (tile + 1) * rows_q) - 1;
      return numeric::causal_key_end(last, sq, sk, problem.causal);
    };
    const int tiles = (sq + rows_q - 1) / rows_q;
    if (tiles == 0) continue;
    const std::int64_t group_keys = keys_of(tiles - 1);
    for (int h = 0; h < heads; ++h) {
      for (int tile = tiles - 1; tile >= 0; --tile) items.push_back({group_keys, keys_of(tile), {b, tile, h}});
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const Costed& a, const Costed& b) {
    if (a.group_keys != b.group_keys) return a.group_keys > b.group_keys;
    if (a.item.sequence != b.item.sequence) return a.item.sequence < b.item.sequence;
    if (a.item.head != b.item.head) return a.item.head < b.item.head;
    return a.keys > b.keys;
  });
  std::vector<WorkItem> work;
  work.reserve(items.size());
  for (const Costed& costed : items) work.push_back(costed.item);
  return work;
}

}  // namespace mla::kokkos
