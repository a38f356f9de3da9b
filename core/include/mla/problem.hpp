// The description of one prefill step: which tokens belong to which sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "mla/tensor.hpp"

namespace mla {

// Cumulative sequence lengths on the host, vLLM's cu_seqlens: B+1 entries that
// start at 0 and never decrease. Backends copy them to the device in prepare().
struct PrefillMetadata {
  std::vector<std::int32_t> cu_seqlens_q;  // [B+1] new (query) tokens per sequence
  std::vector<std::int32_t> cu_seqlens_k;  // [B+1] keys of the new tokens; equal to cu_seqlens_q
                                           // in vLLM, longer rows allowed (bottom-right causal)
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  bool causal = true;

  // One entry per context chunk: keys of cached tokens, [B+1] each.
  struct Chunk {
    std::vector<std::int32_t> cu_seqlens_k;
    int max_seqlen_k = 0;
  };
  std::vector<Chunk> chunks;

  int batch_size() const { return cu_seqlens_q.empty() ? 0 : static_cast<int>(cu_seqlens_q.size()) - 1; }
  std::int64_t num_q_tokens() const { return cu_seqlens_q.empty() ? 0 : cu_seqlens_q.back(); }
  std::int64_t num_k_tokens() const { return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back(); }

  // Builds metadata from per-sequence lengths and fills the max lengths.
  static PrefillMetadata from_lengths(const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                                      bool causal = true);
  // Appends a context chunk from per-sequence key lengths.
  void add_chunk(const std::vector<int>& chunk_k_lens);
};

// A step's metadata where an engine keeps it: cu_seqlens arrays already in
// memory the queue's device reads (vLLM's query_start_loc and the chunked
// context's cu_seq_lens), and the sizes the engine knows on the host. GPU
// backends read the arrays on the device only, so preparing a step copies
// nothing and waits for nothing, and can be captured into a CUDA graph;
// other backends read them through the queue (on the host queue, directly).
// The arrays must stay valid and unchanged until the step's work is done.
struct DevicePrefillMetadata {
  int batch_size = 0;                          // B
  const std::int32_t* cu_seqlens_q = nullptr;  // [B+1]
  const std::int32_t* cu_seqlens_k = nullptr;  // [B+1]
  std::int64_t num_q_tokens = 0;               // cu_seqlens_q[B]
  std::int64_t num_k_tokens = 0;               // cu_seqlens_k[B]
  // At least the longest sequence: GPU grids are sized by them and cannot
  // check them (backends that read the arrays on the host do).
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  bool causal = true;
  MemoryKind memory = MemoryKind::device;  // where the arrays live

  struct Chunk {
    const std::int32_t* cu_seqlens_k = nullptr;  // [B+1]
    std::int64_t num_k_tokens = 0;               // cu_seqlens_k[B]
    int max_seqlen_k = 0;
  };
  std::vector<Chunk> chunks;
};

// Host-side checks of the sizes and pointers (the arrays are not read):
// raises Error(invalid_argument).
void check_device_metadata(const DevicePrefillMetadata& metadata);

// Raises Error(invalid_argument) naming `what` unless `cu` has at least one
// entry, starts at 0 and never decreases, and its last entry equals `total`
// (pass total < 0 to skip that check).
void check_cu_seqlens(const std::vector<std::int32_t>& cu, const char* what, std::int64_t total = -1);

// Checks the metadata as a whole (equal batch sizes of q, k and every chunk).
void check_metadata(const PrefillMetadata& metadata);

// Max difference between neighbouring entries; 0 for fewer than two entries
// (no sequence) or when no difference is positive.
int max_seqlen(const std::vector<std::int32_t>& cu);

}  // namespace mla
