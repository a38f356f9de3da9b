// What the KOKKOS flash-attention kernels share: the work list (one item
// per (sequence, query tile, head), computed alone by one thread), and the
// prefetch of their K/V staging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flash_attention.hpp"

namespace mla::kokkos {

struct WorkItem {
  int sequence;
  int q_tile;
  int head;
};

inline int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// Asks for the cache lines of [begin, begin + bytes) in L1 (prefetcht0 on
// x86-64), without waiting. K and V rows of one head are a few hundred
// bytes each, a head stride apart: too short for the hardware prefetchers
// to follow, so the kernels' staging loops ask for a row a few rows before
// they copy it.
inline void prefetch_to_l1(const void* begin, std::size_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  constexpr std::uintptr_t kLine = 64;
  const auto first = reinterpret_cast<std::uintptr_t>(begin) & ~(kLine - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(begin) + bytes;
  for (std::uintptr_t line = first; line < end; line += kLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
  }
#else
  (void)begin;
  (void)bytes;
#endif
}

// Items with tiles of rows_q queries, ordered for dynamic scheduling
// (flash_work.cpp says how).
std::vector<WorkItem> build_work_list(const AttentionProblem& problem, int heads, int rows_q);

}  // namespace mla::kokkos
