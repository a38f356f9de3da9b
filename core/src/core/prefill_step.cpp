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
  p.out = cursor.view(params.output_dtype(), {num_q, params.num_heads, params.dims.v_head_dim});
  p.lse = cursor.view(DType::float32, {params.num_heads, num_q});
  return p;
}

// The step's workspace, in order: the attention plan's (its words and the
// split-KV partials), an LSE for the result when the caller wants none (the
// merges need one), then, with context chunks, the chunk's own result and
// the second buffer of the merge ping-pong. Over a measuring cursor it gives
// prefill_step_workspace_size.
struct StepWorkspace {
  Workspace plan;
  TensorView own_lse;
  Partial context, spare;
};

StepWorkspace carve_step(WorkspaceCursor& cursor, const BackendParams& params, std::int64_t num_q,
                         std::size_t num_chunks, std::size_t plan_bytes) {
  StepWorkspace w;
  w.plan = {cursor.bytes(plan_bytes), plan_bytes};
  w.own_lse = cursor.view(DType::float32, {params.num_heads, num_q});
  if (num_chunks > 0) {
    w.context = carve_partial(cursor, params, num_q);
    w.spare = carve_partial(cursor, params, num_q);
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

std::size_t workspace_size(const BackendParams& params, std::int64_t num_q, std::size_t num_chunks,
                           std::size_t plan_bytes) {
  WorkspaceCursor measure = WorkspaceCursor::measuring();
  carve_step(measure, params, num_q, num_chunks, plan_bytes);
  return measure.used();
}

PlanOptions step_options(std::size_t chunks) {
  PlanOptions options;
  options.split_keys = chunks > 0;
  return options;
}

// The step once its metadata is known in either form: `make_plan` plans it
// with the backend, `plan_bound` is attention_workspace_size for it.
template <class MakePlan>
void run_step(PrefillBackend& backend, Queue& queue, std::int64_t num_q, std::size_t chunks, std::size_t plan_bound,
              MakePlan&& make_plan, const TensorView& q, const TensorView& k, const TensorView& v,
              const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v, float scale,
              const PrefillStepBuffers& buffers, const std::optional<InputDescales>& descales,
              const AttentionMask& mask) {
  check_chunk_views(chunks, chunk_k, chunk_v);
  detail::check_no_overlap(q, k, v, chunk_k, chunk_v, buffers, descales, mask);
  const BackendParams& params = backend.params();
  detail::check_workspace("run_prefill_step", "prefill_step_workspace_size", buffers.workspace, buffers.workspace_bytes,
                          workspace_size(params, num_q, chunks, plan_bound));
  if (buffers.out.empty_view()) raise(ErrorCategory::invalid_argument, "run_prefill_step: buffers.out is missing");
  WorkspaceCursor cursor(buffers.workspace, buffers.workspace_bytes, "run_prefill_step");
  const StepWorkspace work = carve_step(cursor, params, num_q, chunks, plan_bound);
  const Partial result{buffers.out, buffers.lse.empty_view() ? work.own_lse : buffers.lse};

  const AttentionPlan plan = make_plan();
  if (plan.workspace_bytes > work.plan.bytes) {
    raise(ErrorCategory::invalid_argument, "run_prefill_step: " + backend.name() + "'s plan needs " +
                                               std::to_string(plan.workspace_bytes) +
                                               " bytes of workspace, more than prefill_step_workspace_size counts (" +
                                               std::to_string(work.plan.bytes) + ")");
  }
  const PrefillBackend& stateless = backend;
  // The mask is checked, and the sinks read back and checked (on a GPU
  // queue a synchronising copy of H floats), before any call writes: a bad
  // one found by the last merge would leave the caller's buffers half written.
  check_attention_mask(backend, plan, queue, mask, buffers.out, buffers.lse, "run_prefill_step");
  if (mask.has_sinks()) read_sinks(queue, mask.sinks, backend.params().num_heads);
  stateless.upload_plan(queue, plan, work.plan);
  if (chunks == 0) {
    stateless.run_new_tokens(queue, plan, work.plan, q, k, v, scale, /*return_lse=*/true, result.out, std::nullopt,
                             result.lse, descales, mask);
    return;
  }
  // The partial calls take the mask without its sinks; the last merge
  // applies them once (docs/contract.md §12).
  const AttentionMask partial_mask = mask.without_sinks();
  // Each merge reads one buffer and writes the other; the new tokens start in
  // the one that makes the last merge land in the caller's.
  const Partial& context = work.context;
  const Partial& spare = work.spare;
  Partial current = chunks % 2 == 0 ? result : spare;
  Partial next = chunks % 2 == 0 ? spare : result;
  stateless.run_new_tokens(queue, plan, work.plan, q, k, v, scale, /*return_lse=*/true, current.out, std::nullopt,
                           current.lse, descales, partial_mask);
  for (std::size_t c = 0; c < chunks; ++c) {
    stateless.run_context_chunk(queue, plan, work.plan, static_cast<int>(c), q, chunk_k[c], chunk_v[c], scale,
                                context.out, context.lse, descales, partial_mask);
    MergeArgs args;
    args.prefix_out = context.out;
    args.prefix_lse = context.lse;
    args.suffix_out = current.out;
    args.suffix_lse = current.lse;
    args.out = next.out;
    args.out_lse = next.lse;
    if (c + 1 == chunks) args.sinks = mask.sinks;
    stateless.merge_attn_states(queue, args);
    std::swap(current, next);
  }
}

}  // namespace

std::size_t prefill_step_workspace_size(const BackendParams& params, const PrefillMetadata& metadata) {
  const std::size_t plan = attention_workspace_size(params, metadata, step_options(metadata.chunks.size()));
  return workspace_size(params, metadata.num_q_tokens(), metadata.chunks.size(), plan);
}

std::size_t prefill_step_workspace_size(const BackendParams& params, const DevicePrefillMetadata& metadata) {
  const std::size_t plan = attention_workspace_size(params, metadata, step_options(metadata.chunks.size()));
  return workspace_size(params, metadata.num_q_tokens, metadata.chunks.size(), plan);
}

void run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers,
                      const std::optional<InputDescales>& descales, const AttentionMask& mask) {
  check_metadata(metadata);
  const PlanOptions options = step_options(metadata.chunks.size());
  run_step(
      backend, queue, metadata.num_q_tokens(), metadata.chunks.size(),
      attention_workspace_size(backend.params(), metadata, options),
      [&] { return static_cast<const PrefillBackend&>(backend).plan(queue, metadata, options); }, q, k, v, chunk_k,
      chunk_v, scale, buffers, descales, mask);
}

void run_prefill_step(PrefillBackend& backend, Queue& queue, const DevicePrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers,
                      const std::optional<InputDescales>& descales, const AttentionMask& mask) {
  check_device_metadata(metadata);
  const PlanOptions options = step_options(metadata.chunks.size());
  run_step(
      backend, queue, metadata.num_q_tokens, metadata.chunks.size(),
      attention_workspace_size(backend.params(), metadata, options),
      [&] { return static_cast<const PrefillBackend&>(backend).plan(queue, metadata, options); }, q, k, v, chunk_k,
      chunk_v, scale, buffers, descales, mask);
}

AttentionResult run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata,
                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                 const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v,
                                 float scale, const std::optional<InputDescales>& descales, const AttentionMask& mask) {
  check_chunk_views(metadata.chunks.size(), chunk_k, chunk_v);
  check_metadata(metadata);
  const BackendParams& params = backend.params();
  const std::int64_t num_q = metadata.num_q_tokens();
  const std::int64_t heads = params.num_heads;
  const std::int64_t dv = params.dims.v_head_dim;
  AttentionResult result;
  // An empty batch gets null pointers with zero-sized views, which every kernel skips.
  const DType out_dtype = params.output_dtype();
  result.out_storage = UsmBuffer::device(queue, static_cast<std::size_t>(num_q * heads * dv) * dtype_size(out_dtype));
  result.lse_storage = UsmBuffer::device(queue, static_cast<std::size_t>(num_q * heads) * sizeof(float));
  result.out = TensorView::contiguous(result.out_storage.get(), out_dtype, {num_q, heads, dv}, MemoryKind::device);
  result.lse = TensorView::contiguous(result.lse_storage.get(), DType::float32, {heads, num_q}, MemoryKind::device);
  // The workspace dies at the end of this call while the queue may still be
  // reading it. That is safe because a queue's free waits for the device
  // (cudaFree / hipFree synchronise) or runs on the host queue, where the
  // work is already done.
  PrefillStepBuffers buffers{result.out, result.lse, nullptr, prefill_step_workspace_size(params, metadata)};
  UsmBuffer workspace = UsmBuffer::device(queue, buffers.workspace_bytes);
  buffers.workspace = workspace.get();
  run_prefill_step(backend, queue, metadata, q, k, v, chunk_k, chunk_v, scale, buffers, descales, mask);
  return result;
}

}  // namespace mla
