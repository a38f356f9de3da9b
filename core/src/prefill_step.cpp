// One chunked-prefill step as vLLM's forward_mha runs it: causal attention of
// the new tokens, then every context chunk merged into the running result.
// Any backend serves it through the PrefillBackend interface alone.
#include <string>
#include <utility>

#include "mla/backend.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

// A [num_q, H, V] output and [H, num_q] LSE owned by `queue`, the second
// buffer of the merge ping-pong.
AttentionResult allocate_merge_target(Queue& queue, const BackendParams& params, std::int64_t num_q) {
  const std::int64_t heads = params.num_heads;
  const std::int64_t dv = params.dims.v_head_dim;
  AttentionResult result;
  // An empty batch gets null pointers with zero-sized views, which every kernel skips.
  const auto out_elements = static_cast<std::size_t>(num_q * heads * dv);
  const auto lse_elements = static_cast<std::size_t>(num_q * heads);
  result.out_storage = UsmBuffer::device(queue, out_elements * dtype_size(params.dtype));
  result.lse_storage = UsmBuffer::device(queue, lse_elements * dtype_size(DType::float32));
  result.out = TensorView::contiguous(result.out_storage.get(), params.dtype, {num_q, heads, dv}, MemoryKind::device);
  result.lse = TensorView::contiguous(result.lse_storage.get(), DType::float32, {heads, num_q}, MemoryKind::device);
  return result;
}

}  // namespace

AttentionResult run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata,
                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                 const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v) {
  if (chunk_k.size() != metadata.chunks.size() || chunk_v.size() != metadata.chunks.size()) {
    raise(ErrorCategory::invalid_argument, "run_prefill_step: the metadata has " +
                                               std::to_string(metadata.chunks.size()) + " context chunks but " +
                                               std::to_string(chunk_k.size()) + " chunk_k and " +
                                               std::to_string(chunk_v.size()) + " chunk_v views were given");
  }
  backend.prepare(queue, metadata);
  AttentionResult current = backend.run_new_tokens(queue, q, k, v, /*return_lse=*/true);
  if (metadata.chunks.empty()) return current;

  // Each merge reads `current` and writes `spare`, then the two swap. The
  // chunk's own result dies at the end of its iteration while the queue may
  // still be reading it. That is safe because a queue's free waits for the
  // device (cudaFree / hipFree synchronise) or runs on the host queue, where
  // the work is already done.
  AttentionResult spare = allocate_merge_target(queue, backend.params(), metadata.num_q_tokens());
  for (std::size_t c = 0; c < metadata.chunks.size(); ++c) {
    AttentionResult context = backend.run_context_chunk(queue, static_cast<int>(c), q, chunk_k[c], chunk_v[c]);
    MergeArgs args;
    args.prefix_out = context.out;
    args.prefix_lse = context.lse;
    args.suffix_out = current.out;
    args.suffix_lse = current.lse;
    args.out = spare.out;
    args.out_lse = spare.lse;
    backend.merge_attn_states(queue, args);
    std::swap(current, spare);
  }
  return current;
}

}  // namespace mla
