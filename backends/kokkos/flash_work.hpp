// The work list of the KOKKOS flash-attention kernels: one item per
// (sequence, query tile, head), computed alone by one thread.
#pragma once

#include <vector>

#include "flash_attention.hpp"

namespace mla::kokkos {

struct WorkItem {
  int sequence;
  int q_tile;
  int head;
};

inline int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// Items with tiles of rows_q queries, ordered for dynamic scheduling
// (flash_work.cpp says how).
std::vector<WorkItem> build_work_list(const AttentionProblem& problem, int heads, int rows_q);

}  // namespace mla::kokkos
