#include "host/host_backend.hpp"

#include <string>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla::detail {
namespace {

// Host kernels dereference tensor pointers on the calling thread, which is
// only meaningful for memory of the host queue (its device and shared
// allocations are host memory too).
void require_host_queue(const PrefillBackend& backend, const Queue& queue, const char* operation) {
  require_queue_kind(backend.name(), operation, {DeviceBackend::host}, queue);
}

// Host kernels take the scale as a number (read_out_scale reads and checks
// a device one: memory of the host queue, so no wait).
std::optional<float> host_scale(Queue& queue, const std::optional<OutputScale>& scale) {
  if (!scale) return std::nullopt;
  return read_out_scale(queue, *scale);
}

}  // namespace

void HostBackend::prepare(Queue& queue, const PrefillMetadata& metadata) {
  require_host_queue(*this, queue, "prepare");
  PrefillBackend::prepare(queue, metadata);
}

bool HostBackend::supports_quant_output(QuantKey key) const { return key == QuantKey::fp8_e4m3_static_per_tensor; }

AttentionResult HostBackend::run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                            float scale, bool return_lse, std::optional<TensorView> out,
                                            std::optional<OutputScale> out_scale, std::optional<TensorView> lse) {
  require_host_queue(*this, queue, "run_new_tokens");
  check_new_tokens_args(*this, queue, q, k, v, scale, out, out_scale, lse);
  const PrefillMetadata& meta = metadata();
  const DType out_dtype = out_scale ? DType::float8_e4m3 : params().dtype;
  AttentionResult result = allocate_result(*this, queue, meta.num_q_tokens(), return_lse, out, out_dtype, lse);
  HostAttentionProblem problem;
  problem.q = q;
  problem.k = k;
  problem.v = v;
  problem.cu_q = &meta.cu_seqlens_q;
  problem.cu_k = &meta.cu_seqlens_k;
  problem.causal = meta.causal;
  problem.scale = scale;
  problem.out = result.out;
  problem.out_scale = host_scale(queue, out_scale);
  problem.lse = result.lse;
  attention(problem);
  return result;
}

AttentionResult HostBackend::run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                               const TensorView& v, float scale, std::optional<TensorView> out,
                                               std::optional<TensorView> lse) {
  require_host_queue(*this, queue, "run_context_chunk");
  check_chunk_args(*this, queue, chunk_index, q, k, v, scale, out, lse);
  const PrefillMetadata& meta = metadata();
  AttentionResult result =
      allocate_result(*this, queue, meta.num_q_tokens(), /*return_lse=*/true, out, params().dtype, lse);
  HostAttentionProblem problem;
  problem.q = q;
  problem.k = k;
  problem.v = v;
  problem.cu_q = &meta.cu_seqlens_q;
  problem.cu_k = &meta.chunks[static_cast<std::size_t>(chunk_index)].cu_seqlens_k;
  problem.causal = false;
  problem.scale = scale;
  problem.out = result.out;
  problem.lse = result.lse;
  attention(problem);
  return result;
}

void HostBackend::merge_attn_states(Queue& queue, const MergeArgs& args) {
  require_host_queue(*this, queue, "merge_attn_states");
  check_merge_args(*this, queue, args);
  MergeArgs resolved = args;
  if (const std::optional<float> scale = host_scale(queue, args.out_scale)) resolved.out_scale = OutputScale(*scale);
  merge(resolved);
}

}  // namespace mla::detail
