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
#include <optional>
#include <vector>

#include "mla/backend.hpp"

namespace mla {

// How a step's cached context is processed in chunks under a workspace
// budget: vLLM's chunked-context planning, for engines that gather the
// context themselves and for the whole MLA step below.

// One chunk: for each of the B sequences, the run of its context tokens the
// chunk covers ([starts[b], starts[b] + length)), as cu_seqlens.
struct ContextChunk {
  std::vector<std::int32_t> starts;        // [B] first context token of each sequence in the chunk
  std::vector<std::int32_t> cu_seqlens_k;  // [B+1] tokens each sequence contributes, cumulated
  int max_seqlen_k = 0;

  std::int64_t num_tokens() const { return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back(); }
  std::int32_t length(std::size_t sequence) const { return cu_seqlens_k[sequence + 1] - cu_seqlens_k[sequence]; }
};

struct ContextPlan {
  // Context tokens per sequence per chunk, a multiple of the block size;
  // sequences in later groups may get more (see plan_context_chunks).
  std::vector<std::int64_t> chunk_size;  // one entry per chunk
  std::vector<ContextChunk> chunks;
};

// Chunks that together cover every context token of every sequence exactly
// once, in order, each gathering at most `workspace_tokens` tokens.
//
// As vLLM plans them: with M sequences that have context, each chunk takes
// round_down(workspace_tokens / M, block_size) tokens of every such sequence,
// and there are as many chunks as the longest context needs. When the
// workspace holds fewer than M blocks, the sequences are taken in groups of
// workspace_tokens / block_size (in batch order), each group planned that way
// in turn; vLLM refuses such a budget. A sequence without context contributes
// nothing to any chunk. Raises Error(invalid_argument) for a block size below
// 1, a workspace smaller than one block, or a negative context length.
ContextPlan plan_context_chunks(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens,
                                int block_size);

// Chunks filled to exactly `workspace_tokens` tokens (the last one less):
// the sequences' contexts laid end to end in batch order and cut every
// `workspace_tokens`, so short contexts share a chunk and a long one runs
// over several. Fewer chunks than plan_context_chunks when the contexts
// differ in length; a gather by cache slot needs no block alignment.
// Raises Error(invalid_argument) for a workspace below 1 token or a negative
// context length. chunk_size holds each chunk's token count.
ContextPlan pack_context_chunks(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens);

// Raises Error(invalid_argument) naming the chunk and sequence unless `plan`
// has B+1 cu_seqlens_k and B starts per chunk (B = context_lens.size()),
// non-negative runs inside each context, and together covers every context
// token of every sequence exactly once.
void check_context_plan(const ContextPlan& plan, const std::vector<std::int32_t>& context_lens);

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
  TensorView cache;          // the plan's dtype, or float8_e4m3 bytes dequantised by cache_scale
  float cache_scale = 1.0f;  // fp8 cache: value = decoded byte * cache_scale
  // float32, float16, bfloat16, or float8_e4m3 bytes taken at their decoded
  // values with no scale: a block-scaled fp8 checkpoint's kv_b_proj must be
  // dequantised (times its scales) before it comes here.
  TensorView kv_b_proj;
  // The FP8 attention mode only (a plan whose attention_dtype is
  // float8_e4m3; docs/contract.md §4): q holds e4m3 bytes with this
  // descale, and the projected keys and values are divided by k_scale and
  // v_scale (vLLM's static k_scale and v_scale) and rounded to e4m3,
  // saturating, before attention. An absent scale is taken for each
  // attention call as the largest magnitude of its keys (values) / 448.
  Descale q_descale = 1.0f;
  std::optional<float> k_scale = std::nullopt;
  std::optional<float> v_scale = std::nullopt;
  // A grouped format (mla/tensor.hpp, docs/contract.md §13): the cache is
  // then [num_blocks, block_size, record bytes] of float8_e4m3 and
  // cache_scale stays 1.
  CacheFormat cache_format = CacheFormat::plain;
  // docs/contract.md §12: which keys each query sees beyond causality and
  // the heads' sinks, over each sequence's whole key range (its context,
  // then its new tokens), applied as run_prefill_step applies them: the
  // sinks once, in the last merge. A top-k mask or window needs the plan's
  // context chunks in order (each sequence's chunk c starting where its
  // chunk c - 1 ended, as plan_context_chunks makes them). Empty: none.
  AttentionMask mask = {};
};

// The scales the FP8 attention mode quantised one attention call's keys and
// values with (their descales in that call).
struct KvScales {
  float k = 1.0f;
  float v = 1.0f;
};

struct MlaStepOutputs {
  TensorView out;  // [Nq, H, V] in the plan's dtype (float8_e4m3 with an out_scale)
  TensorView lse;  // [H, Nq] float32; empty view: not wanted
  // The FP8 attention mode: when set, receives the scales of each attention
  // call, the new tokens' first, then one per context chunk. A scale the
  // step found on a GPU queue is read back when found: the step then waits
  // for the queue's work so far (one wait per attention call).
  // The quantisation runs on the step's queue (PrefillBackend::quantise_e4m3).
  std::vector<KvScales>* kv_scales = nullptr;
};

// A step's workspace (mla/backend.hpp's Workspace): MlaStepPlan::workspace_bytes
// or more. Empty (null, 0 bytes): run_mla_prefill allocates it on the queue
// and frees it before it returns.

// Where a step's largest block id comes from: the cache must have more blocks.
struct BlockTableEntry {
  int sequence = 0;  // row of the block table
  int column = 0;
  std::int32_t block = -1;  // -1: the step reads no block
};

// Everything run_mla_prefill needs to know before it sees a tensor, worked
// out once on the host by plan_mla_prefill: a value, so a step's plan can be
// kept, compared, sized for and run again. Each quantity has this one source;
// run_mla_prefill checks the backend and every tensor against it and names
// both values when they differ.
struct MlaStepPlan {
  // The model's and the cache's sizes.
  int num_heads = 0;
  MlaDims dims = deepseek_dims;
  DType dtype = DType::bfloat16;  // kv_c, k_pe, the projected keys and values, out; q and the cache unless fp8
  // What attention reads: `dtype`, or float8_e4m3 in the FP8 attention mode
  // (a backend built with dtype float8_e4m3 and out_dtype `dtype`): q, and
  // the projected keys and values quantised (MlaStepInputs::k_scale).
  DType attention_dtype = DType::bfloat16;
  int kv_lora_rank = 0;  // L: latent values per token
  int block_size = 0;    // tokens per cache block
  // The step.
  int batch_size = 0;
  std::int64_t num_q_tokens = 0;
  BlockTableEntry largest_block;
  // The attention of the step: the new tokens (causal, their own keys) and
  // one entry per context chunk, each chunk's keys as cu_seqlens.
  PrefillMetadata attention;
  // Which context tokens each chunk gathers: a chunk may hold several
  // sequences' runs and a sequence may run over several chunks.
  ContextPlan context;
  // The gather lists: the cache slot (block * block_size + position) of
  // every token of every chunk, chunk after chunk in the order of the chunk's
  // cu_seqlens_k; chunk c's are [slot_offsets[c], slot_offsets[c + 1]).
  std::vector<std::int64_t> slots;
  std::vector<std::int64_t> slot_offsets;
  // The attention calls planned by the backend the step runs on (its
  // cu_seqlens, heaviest-first work lists and split-KV decisions: one phase
  // for the new tokens, one per chunk), when the step was planned with the
  // backend; otherwise run_mla_prefill plans them from `attention` on every
  // run.
  std::optional<AttentionPlan> attention_plan;
  // Bytes of workspace the run needs: the attention plan's words and split-KV
  // partials (attention_workspace_size; split-KV when there is context), the
  // gather lists the queue reads, float32 latents, keys and values for the
  // new tokens or the largest chunk, and, when there is context, three
  // partial results. An engine sizes one workspace for its largest step; a
  // smaller step fits in it.
  std::size_t workspace_bytes = 0;

  std::size_t num_chunks() const { return context.chunks.size(); }
};

// Plans a step for a backend built with `params` (heads, dims, dtype and
// kv_lora_rank come from there; dtype float8_e4m3 with out_dtype float16 or
// bfloat16 plans the FP8 attention mode) over a cache of `block_size` tokens per
// block, gathering at most `workspace_tokens` context tokens at a time
// (plan_context_chunks: vLLM's plan). Checks the metadata and raises
// Error(invalid_argument) naming the culprit: cu_seqlens, a context longer
// than its row of the block table, a negative block id.
MlaStepPlan plan_mla_prefill(const BackendParams& params, const MlaStepMetadata& metadata, int block_size,
                             std::int64_t workspace_tokens);
// The same with the caller's chunks (plan_context_chunks, pack_context_chunks
// or an engine's own), which must cover every context token of every
// sequence exactly once.
MlaStepPlan plan_mla_prefill(const BackendParams& params, const MlaStepMetadata& metadata, int block_size,
                             const ContextPlan& chunks);

// The same, with the step's attention planned by `backend` for `queue`'s
// device and kept in the plan (MlaStepPlan::attention_plan): the kernel
// chooser, the work lists and the split decisions are worked out here once,
// not on every run. Run it on that backend (or one of the same name and
// parameters) and a queue of that device.
MlaStepPlan plan_mla_prefill(const PrefillBackend& backend, const Queue& queue, const MlaStepMetadata& metadata,
                             int block_size, std::int64_t workspace_tokens);
MlaStepPlan plan_mla_prefill(const PrefillBackend& backend, const Queue& queue, const MlaStepMetadata& metadata,
                             int block_size, const ContextPlan& chunks);

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

// Runs a planned step on `backend` and its `queue`, with softmax scale
// `scale` (finite) for the attention. Checks the backend's
// parameters and every tensor against the plan first and raises
// Error(invalid_argument) naming both values: shapes and dtypes, a cache of
// other blocks, a block id outside the cache. Every tensor must be in memory
// the queue can reach. Pass an empty `workspace` ({}) to let the call
// allocate its own.
//
// The gather and up-projection run through the backend
// (PrefillBackend::gather_latents and project_latents): on the host for
// REFERENCE, KOKKOS and plugins, as kernels on the GPU for the flash
// backends. With a workspace the call allocates nothing on the queue: the
// plan's attention words and gather lists are copied into it (copies from
// the host, which may wait for the queue) and the backend reads them there. `out_scale` writes out as float8_e4m3, on
// backends that support it. With `phases` the call records events between the phases and waits for the queue at the end
// to fill it in; without, it returns without waiting for the kernels.
void run_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan, const MlaStepInputs& inputs,
                     const MlaStepOutputs& outputs, const Workspace& workspace, float scale,
                     std::optional<OutputScale> out_scale = std::nullopt, MlaStepPhases* phases = nullptr);

// The step in two halves, for engines that capture it into a CUDA graph.
// upload_mla_prefill copies the plan's attention words (cu_seqlens, the
// flash backends' work lists) and gather lists into the caller's
// `workspace` through `queue`: the only host-to-device copies of a step,
// done once per plan, outside the capture. run_uploaded_mla_prefill then
// runs the step from that workspace as run_mla_prefill does, with the same
// work lists and bits, and only enqueues work (gather, projection,
// attention, merges): no copy from the host, no allocation, no wait. Both
// need a plan that holds its attention plan (plan_mla_prefill with the
// backend) and a workspace of MlaStepPlan::workspace_bytes; the workspace
// must not be reused by another plan between the two. Raise as
// run_mla_prefill does.
void upload_mla_prefill(const PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan,
                        const Workspace& workspace);
void run_uploaded_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan,
                              const MlaStepInputs& inputs, const MlaStepOutputs& outputs, const Workspace& workspace,
                              float scale, std::optional<OutputScale> out_scale = std::nullopt);

}  // namespace mla
