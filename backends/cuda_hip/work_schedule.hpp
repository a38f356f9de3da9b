// Which keys a query tile sees, and the order in which thread blocks take the
// (sequence, query tile) pairs of a varlen batch. The kernels and the host
// planner use the same functions, so the loop bounds a block runs are the ones
// the planner weighed.
//
// Causal masks are bottom-right aligned (docs/contract.md §1): query row i of a
// sequence with sq queries and sk keys sees keys j <= i + sk - sq.
#pragma once

#include <cstdint>
#include <vector>

#include "mla/detail/host_device.hpp"
#include "mla/detail/numeric.hpp"

namespace mla::gpu {

// One thread block's share: query tile `q_tile` (rows q_tile * tile_rows ...)
// of sequence `seq`, for every head (the grid covers heads as well).
struct WorkItem {
  std::int32_t seq = 0;
  std::int32_t q_tile = 0;
};

struct TileShape {
  int rows = 0;  // query rows per block
  int cols = 0;  // keys per iteration
};

// Keys any row of the tile [row_begin, row_begin + rows) sees: the loop's end.
MLA_HOST_DEVICE inline int tile_key_end(int row_begin, int rows, int seqlen_q, int seqlen_k, bool causal) {
  return numeric::causal_key_end(row_begin + rows - 1, seqlen_q, seqlen_k, causal);
}

// Keys every row of the tile sees: key tiles below this need no mask.
MLA_HOST_DEVICE inline int tile_unmasked_key_end(int row_begin, int seqlen_q, int seqlen_k, bool causal) {
  return numeric::causal_key_end(row_begin, seqlen_q, seqlen_k, causal);
}

MLA_HOST_DEVICE inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Key tiles the block of query tile `q_tile` iterates over.
MLA_HOST_DEVICE inline int key_tiles(int q_tile, int seqlen_q, int seqlen_k, bool causal, TileShape tile) {
  const int row_begin = q_tile * tile.rows;
  const int rows = seqlen_q - row_begin < tile.rows ? seqlen_q - row_begin : tile.rows;
  return ceil_div(tile_key_end(row_begin, rows, seqlen_q, seqlen_k, causal), tile.cols);
}

// Leading key tiles that need no mask: every key is visible to every row
// (whole tiles only; the rest of the loop masks per element).
MLA_HOST_DEVICE inline int unmasked_key_tiles(int q_tile, int seqlen_q, int seqlen_k, bool causal, TileShape tile) {
  return tile_unmasked_key_end(q_tile * tile.rows, seqlen_q, seqlen_k, causal) / tile.cols;
}

// The item of work index `w`: the planner's list when there is one. Without
// one (metadata that lives on the device, whose lengths the host never
// reads), every sequence gets `tiles_per_seq` consecutive indices, its last
// tile first (under a causal mask the last tile is the heaviest); a tile past
// the end of its sequence is empty and its block returns at once.
MLA_HOST_DEVICE inline WorkItem work_item(const WorkItem* list, int tiles_per_seq, int w) {
  if (list != nullptr) return list[w];
  return WorkItem{w / tiles_per_seq, tiles_per_seq - 1 - w % tiles_per_seq};
}

// Which (work item, head) thread block `block` of a grid of num_work x
// num_heads blocks takes: heads in groups of `group` (a divisor of
// num_heads), each group's blocks before the next group's, and within a
// group the work items in list order (heaviest first), every head of the
// group for one before the next. While a group runs, the blocks in flight
// read the K and V of its heads only, so a group sized to the L2 keeps them
// there; heads fastest within it keeps the heaviest tiles of the group first
// (work items fastest left the heavy tiles of a group's last heads to the
// grid's tail: 0.72-0.9x at 16 heads on an H200). A group of all the heads is
// the plain order.
struct HeadTile {
  int work = 0;
  int head = 0;
};

MLA_HOST_DEVICE inline HeadTile head_tile(int block, int num_work, int num_heads, int group) {
  if (group <= 0 || group >= num_heads) return HeadTile{block / num_heads, block % num_heads};
  const int per_group = num_work * group;
  const int g = block / per_group;
  const int r = block - g * per_group;
  return HeadTile{r / group, g * group + r % group};
}

// The key tiles split `split` of `num_splits` visits (split-KV): consecutive
// ranges of ceil(key_tiles / num_splits) tiles, in order; the last splits
// may be empty (begin == end), and then their block writes an output of 0
// and an LSE of -inf, which the merge gives no weight.
struct KeyTileRange {
  int begin = 0;
  int end = 0;
};

MLA_HOST_DEVICE inline KeyTileRange split_key_tiles(int key_tiles, int split, int num_splits) {
  if (num_splits <= 1) return KeyTileRange{0, key_tiles};
  const int per_split = ceil_div(key_tiles, num_splits);
  const int begin = split * per_split < key_tiles ? split * per_split : key_tiles;
  const int end = begin + per_split < key_tiles ? begin + per_split : key_tiles;
  return KeyTileRange{begin, end};
}

// Every (sequence, query tile) of a batch, heaviest first (most key tiles), so
// the long causal tiles start early and the short ones fill the tail. Ties
// keep sequence order. Sequences without queries give no item; sequences
// without keys give items of weight 0, which still write 0 and -inf.
// cu_seqlens_q / cu_seqlens_k: [B+1], already checked.
std::vector<WorkItem> build_work_list(const std::vector<std::int32_t>& cu_seqlens_q,
                                      const std::vector<std::int32_t>& cu_seqlens_k, bool causal, TileShape tile);

}  // namespace mla::gpu
