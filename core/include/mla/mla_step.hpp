// The whole MLA prefill step of a batch, as an engine runs it: gather each
// sequence's cached latent vectors from the paged cache, up-project them and
// the new tokens' latents through kv_b_proj into per-head keys and values,
// attend the new tokens' queries to the context chunk by chunk under a
// workspace budget, and merge with the causal attention over the new tokens.
//
// Shapes (L = kv_lora_rank, dims P, R, V and H heads from the backend):
//   q          [Nq, H, P+R]                 the new tokens' queries
//   kv_c       [Nq, L]                      the new tokens' latents
//   k_pe       [Nq, R]                      their rope keys, shared by every head
//   cache      [num_blocks, block_size, L+R] latent first, rope key last
//   kv_b_proj  [H*(P+V), L]                 y = x W^T; head h's rows: P key rows, then V value rows
//   out        [Nq, H, V], lse [H, Nq] float32 (optional)
// Query i of a sequence with c cached tokens sees all c and the new keys up
// to itself: causal attention over c + s_q keys, aligned bottom-right.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mla/backend.hpp"

namespace mla {

// Which tokens are new and where each sequence's context is cached.
struct MlaStepMetadata {
  std::vector<std::int32_t> cu_seqlens_q;  // [B+1] new tokens per sequence
  std::vector<std::int32_t> context_lens;  // [B] tokens cached before the new ones
  std::vector<std::int32_t> block_table;   // [B, max_blocks] row-major: cache block of each block_size tokens
  int max_blocks = 0;                      // columns of block_table
};

struct MlaStepInputs {
  TensorView q;
  TensorView kv_c;
  TensorView k_pe;
  TensorView cache;          // the backend's dtype, or float8_e4m3 bytes dequantised by cache_scale
  float cache_scale = 1.0f;  // fp8 cache: value = decoded byte * cache_scale
  TensorView kv_b_proj;      // any float dtype
};

struct MlaStepOutputs {
  TensorView out;  // [Nq, H, V] in the backend's dtype
  TensorView lse;  // [H, Nq] float32; empty view: not wanted
  // The caller's workspace: mla_prefill_workspace_size() bytes or more,
  // 64-byte aligned, in memory the queue reaches. Null (and 0 bytes): the
  // call allocates it on the queue and frees it before it returns.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

// Bytes of workspace run_mla_prefill needs for `metadata` with a cache of
// `block_size` tokens per block, `kv_lora_rank` latent values per token and
// `workspace_tokens` gathered at a time: float32 latents, keys and values for
// the new tokens or the largest chunk, the chunks' cache slots, and three
// partial results when there is context. An engine sizes one workspace for
// its largest step; a smaller step fits in it.
std::size_t mla_prefill_workspace_size(const BackendParams& params, const MlaStepMetadata& metadata, int kv_lora_rank,
                                       int block_size, std::int64_t workspace_tokens);

// Where one run_mla_prefill's time went, in milliseconds between events on
// its queue: gathering rows,
// up-projecting them, attention (new tokens and context chunks), merges.
struct MlaStepPhases {
  double gather_ms = 0;
  double projection_ms = 0;
  double attention_ms = 0;
  double merge_ms = 0;
  double total_ms() const { return gather_ms + projection_ms + attention_ms + merge_ms; }
};

// Runs the step on `backend` and its `queue`, gathering at most
// `workspace_tokens` context tokens at a time (plan_context_chunks). Checks
// everything first and raises Error(invalid_argument) naming the culprit:
// shapes and dtypes, a block id outside the cache, a context longer than its
// row of the block table. Every tensor must be in memory the queue can reach.
//
// The gather and up-projection run through the backend
// (PrefillBackend::gather_latents and project_latents): on the host for
// REFERENCE, KOKKOS and plugins, as kernels on the GPU for the flash
// backends. With `outputs.workspace` the call allocates nothing on the queue
// (prepare() aside, which GPU backends do once per size). With `phases` the
// call records events between the phases and waits for the queue at the end
// to fill it in; without, it returns without waiting for the kernels, though
// uploading the chunks' cache slots from the host may wait for the queue.
void run_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepMetadata& metadata,
                     const MlaStepInputs& inputs, const MlaStepOutputs& outputs, std::int64_t workspace_tokens,
                     MlaStepPhases* phases = nullptr);

}  // namespace mla
