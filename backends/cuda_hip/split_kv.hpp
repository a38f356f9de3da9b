// Split-KV planning for the flash kernels (docs/contract.md §3): how many
// ranges a launch's keys are cut into, and where the float32 partials go in
// the scratch the caller lent. Pure host functions, host-tested; the kernels
// read the answer from FlashParams (num_splits, partial_out, partial_lse).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mla::gpu {

// What the split of one launch is decided from.
struct SplitRequest {
  std::int64_t blocks = 0;  // (work item, head) blocks of the launch without a split
  int key_tiles = 0;        // key tiles of the heaviest block (an upper bound)
  int multiprocessors = 0;  // SMs or CUs; 0: unknown, no heuristic split
  std::int64_t rows = 0;    // query tokens x heads: the partials of one split
  int v_head_dim = 0;
  std::size_t scratch_bytes = 0;  // what the caller lent
  int forced = 0;                 // MLA_KV_SPLITS; 0: the heuristic decides
  int max_splits = 16;            // mla::max_kv_splits
};

struct SplitChoice {
  int splits = 1;
  std::string reason;  // why, for the debug log
};

// Bytes the partials of `splits` splits take: the LSEs, padded to 16 bytes,
// then the outputs.
std::size_t split_scratch_bytes(int splits, std::int64_t rows, int v_head_dim);

// FlashAttention's num_splits heuristic, over the splits the scratch holds:
// no split when the blocks fill 80% of the multiprocessors already, or when
// the scratch holds fewer than 2 splits; otherwise the fewest splits whose
// wave efficiency (blocks x splits / multiprocessors over its ceiling) is
// within 85% of the best, counting only split counts that change the key
// tiles per split. MLA_KV_SPLITS (`forced`) replaces the heuristic, still
// capped by the scratch and the key tiles.
SplitChoice choose_kv_splits(const SplitRequest& request);

// MLA_KV_SPLITS=n (1 to max_splits): the split count of every launch that
// has scratch for it, for tuning and tests. Unset or empty: 0. Raises
// Error(invalid_argument) for another value.
int forced_kv_splits(int max_splits);

}  // namespace mla::gpu
