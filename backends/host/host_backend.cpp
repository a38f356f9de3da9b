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

void HostBackend::check_queue(const Queue& queue, const char* operation) const {
  require_host_queue(*this, queue, operation);
}

bool HostBackend::supports_quant_output(QuantKey key) const { return key == QuantKey::fp8_e4m3_static_per_tensor; }

void HostBackend::attend(Queue& queue, const AttentionCall& call) const {
  const PrefillMetadata& meta = *call.plan->lengths;  // host plans always hold them
  HostAttentionProblem problem;
  problem.q = call.q;
  problem.k = call.k;
  problem.v = call.v;
  problem.cu_q = &meta.cu_seqlens_q;
  if (call.chunk < 0) {
    problem.cu_k = &meta.cu_seqlens_k;
    problem.causal = meta.causal;
    problem.out_scale = host_scale(queue, call.out_scale);
  } else {
    problem.cu_k = &meta.chunks[static_cast<std::size_t>(call.chunk)].cu_seqlens_k;
    problem.causal = false;
  }
  problem.scale = call.scale;
  problem.out = call.out;
  problem.lse = call.lse;
  if (params().dtype == DType::float8_e4m3) {
    const InputDescales descales = call.descales.value_or(InputDescales{});
    const int heads = params().num_heads;
    problem.q_descale = read_descales(queue, descales.q, heads, "q");
    problem.k_descale = read_descales(queue, descales.k, heads, "k");
    problem.v_descale = read_descales(queue, descales.v, heads, "v");
  }
  if (call.mask.masks_keys()) {
    const MaskPositions positions = mask_positions(meta, call.chunk);
    problem.mask.topk = call.mask.topk;
    problem.mask.window = call.mask.window;
    problem.mask.query_position = positions.query;
    problem.mask.key_position = positions.key;
  }
  problem.sinks = read_sinks(queue, call.mask.sinks, params().num_heads);
  attention(problem);
}

void HostBackend::merge_attn_states(Queue& queue, const MergeArgs& args) const {
  require_host_queue(*this, queue, "merge_attn_states");
  check_merge_args(*this, queue, args);
  MergeArgs resolved = args;
  if (const std::optional<float> scale = host_scale(queue, args.out_scale)) resolved.out_scale = OutputScale(*scale);
  merge(resolved, read_sinks(queue, args.sinks, static_cast<int>(args.prefix_out.size(1))));
}

}  // namespace mla::detail
