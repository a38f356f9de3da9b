// One chunked-prefill step as vLLM's forward_mha runs it: causal attention of
// the new tokens, then every context chunk merged into the running result.
// Any backend serves it through the PrefillBackend interface alone.
#include <cstdint>
#include <string>
#include <utility>

#include "core/overlap.hpp"
#include "core/workspace.hpp"
#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

using detail::WorkspaceCursor;

// An [N, H, V] output and its [H, N] LSE.
struct Partial {
  TensorView out;
  TensorView lse;
};

Partial carve_partial(WorkspaceCursor& cursor, const BackendParams& params, std::int64_t num_q) {
  Partial p;
  p.out = cursor.view(params.dtype, {num_q, params.num_heads, params.dims.v_head_dim});
  p.lse = cursor.view(DType::float32, {params.num_heads, num_q});
  return p;
}

// The step's workspace, in order: an LSE for the result when the caller
// wants none (the merges need one), then, with context chunks, the chunk's
// own result, the second buffer of the merge ping-pong and the scratch lent
// to the backend for split attention calls. Over a measuring cursor it gives
// prefill_step_workspace_size.
struct StepWorkspace {
  TensorView own_lse;
  Partial context, spare;
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
};

StepWorkspace carve_step(WorkspaceCursor& cursor, const BackendParams& params, std::int64_t num_q,
                         std::size_t num_chunks) {
  StepWorkspace w;
  w.own_lse = cursor.view(DType::float32, {params.num_heads, num_q});
  if (num_chunks > 0) {
    w.context = carve_partial(cursor, params, num_q);
    w.spare = carve_partial(cursor, params, num_q);
    w.scratch_bytes = attention_scratch_size(params, num_q);
    w.scratch = cursor.bytes(w.scratch_bytes);
  }
  return w;
}

void check_chunk_views(std::size_t num_chunks, const std::vector<TensorView>& chunk_k,
                       const std::vector<TensorView>& chunk_v) {
  if (chunk_k.size() != num_chunks || chunk_v.size() != num_chunks) {
    raise(ErrorCategory::invalid_argument, "run_prefill_step: the metadata has " + std::to_string(num_chunks) +
                                               " context chunks but " + std::to_string(chunk_k.size()) +
                                               " chunk_k and " + std::to_string(chunk_v.size()) +
                                               " chunk_v views were given");
  }
}

std::size_t workspace_size(const BackendParams& params, std::int64_t num_q, std::size_t num_chunks) {
  WorkspaceCursor measure = WorkspaceCursor::measuring();
  carve_step(measure, params, num_q, num_chunks);
  return measure.used();
}

// The step once its metadata is known in either form: `prepare` runs the
// backend's prepare() or prepare_device().
template <class Prepare>
void run_step(PrefillBackend& backend, Queue& queue, std::int64_t num_q, std::size_t chunks, Prepare&& prepare,
              const TensorView& q, const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
              const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers) {
  check_chunk_views(chunks, chunk_k, chunk_v);
  detail::check_no_overlap(q, k, v, chunk_k, chunk_v, buffers);
  const BackendParams& params = backend.params();
  detail::check_workspace("run_prefill_step", "prefill_step_workspace_size", buffers.workspace, buffers.workspace_bytes,
                          workspace_size(params, num_q, chunks));
  if (buffers.out.empty_view()) raise(ErrorCategory::invalid_argument, "run_prefill_step: buffers.out is missing");
  WorkspaceCursor cursor(buffers.workspace, buffers.workspace_bytes, "run_prefill_step");
  const StepWorkspace work = carve_step(cursor, params, num_q, chunks);
  const Partial result{buffers.out, buffers.lse.empty_view() ? work.own_lse : buffers.lse};

  prepare();
  if (chunks == 0) {
    backend.run_new_tokens(queue, q, k, v, scale, /*return_lse=*/true, result.out, std::nullopt, result.lse);
    return;
  }
  // Each merge reads one buffer and writes the other; the new tokens start in
  // the one that makes the last merge land in the caller's.
  const Partial& context = work.context;
  const Partial& spare = work.spare;
  backend.lend_attention_scratch(work.scratch, work.scratch_bytes);
  Partial current = chunks % 2 == 0 ? result : spare;
  Partial next = chunks % 2 == 0 ? spare : result;
  backend.run_new_tokens(queue, q, k, v, scale, /*return_lse=*/true, current.out, std::nullopt, current.lse);
  for (std::size_t c = 0; c < chunks; ++c) {
    backend.run_context_chunk(queue, static_cast<int>(c), q, chunk_k[c], chunk_v[c], scale, context.out, context.lse);
    MergeArgs args;
    args.prefix_out = context.out;
    args.prefix_lse = context.lse;
    args.suffix_out = current.out;
    args.suffix_lse = current.lse;
    args.out = next.out;
    args.out_lse = next.lse;
    backend.merge_attn_states(queue, args);
    std::swap(current, next);
  }
}

}  // namespace

std::size_t prefill_step_workspace_size(const BackendParams& params, const PrefillMetadata& metadata) {
  return workspace_size(params, metadata.num_q_tokens(), metadata.chunks.size());
}

std::size_t prefill_step_workspace_size(const BackendParams& params, const DevicePrefillMetadata& metadata) {
  return workspace_size(params, metadata.num_q_tokens, metadata.chunks.size());
}

void run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers) {
  run_step(
      backend, queue, metadata.num_q_tokens(), metadata.chunks.size(), [&] { backend.prepare(queue, metadata); }, q, k,
      v, chunk_k, chunk_v, scale, buffers);
}

void run_prefill_step(PrefillBackend& backend, Queue& queue, const DevicePrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers) {
  check_device_metadata(metadata);
  run_step(
      backend, queue, metadata.num_q_tokens, metadata.chunks.size(), [&] { backend.prepare_device(queue, metadata); },
      q, k, v, chunk_k, chunk_v, scale, buffers);
}

AttentionResult run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata,
                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                 const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v,
                                 float scale) {
  check_chunk_views(metadata.chunks.size(), chunk_k, chunk_v);
  check_metadata(metadata);
  const BackendParams& params = backend.params();
  const std::int64_t num_q = metadata.num_q_tokens();
  const std::int64_t heads = params.num_heads;
  const std::int64_t dv = params.dims.v_head_dim;
  AttentionResult result;
  // An empty batch gets null pointers with zero-sized views, which every kernel skips.
  result.out_storage =
      UsmBuffer::device(queue, static_cast<std::size_t>(num_q * heads * dv) * dtype_size(params.dtype));
  result.lse_storage = UsmBuffer::device(queue, static_cast<std::size_t>(num_q * heads) * sizeof(float));
  result.out = TensorView::contiguous(result.out_storage.get(), params.dtype, {num_q, heads, dv}, MemoryKind::device);
  result.lse = TensorView::contiguous(result.lse_storage.get(), DType::float32, {heads, num_q}, MemoryKind::device);
  // The workspace dies at the end of this call while the queue may still be
  // reading it. That is safe because a queue's free waits for the device
  // (cudaFree / hipFree synchronise) or runs on the host queue, where the
  // work is already done.
  PrefillStepBuffers buffers{result.out, result.lse, nullptr, prefill_step_workspace_size(params, metadata)};
  UsmBuffer workspace = UsmBuffer::device(queue, buffers.workspace_bytes);
  buffers.workspace = workspace.get();
  run_prefill_step(backend, queue, metadata, q, k, v, chunk_k, chunk_v, scale, buffers);
  return result;
}

}  // namespace mla
