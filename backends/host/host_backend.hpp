// Internal: the shared shell of the backends whose kernels read tensor memory
// on the host (REFERENCE, KOKKOS). It guards the queue, checks arguments,
// allocates results and turns each call into one HostAttentionProblem; a
// backend only supplies the attention and merge kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mla/backend.hpp"

namespace mla::detail {

// A call's key mask (docs/contract.md §12) as the host kernels read it:
// query i of sequence b sees the call's key j of it, beyond causality, when
// sees(b, i, j).
struct HostKeyMask {
  TopkMask topk;  // empty: no top-k bits
  std::int64_t window = 0;
  std::vector<std::int64_t> query_position;  // [B]: position of query 0 in the whole key range
  std::vector<std::int64_t> key_position;    // [B]: position of the call's key 0

  bool active() const { return !topk.empty() || window != 0; }
  // The first of the call's keys the window lets query i see (the window
  // must be set; 0 or below: the call's every key).
  std::int64_t window_start(std::size_t b, std::int64_t i) const {
    return query_position[b] + i - window + 1 - key_position[b];
  }
  // Query i's row of top-k words (the mask must be set).
  const std::uint32_t* row_words(std::size_t b, std::int64_t i) const {
    return topk.words + static_cast<std::int64_t>(b) * topk.batch_stride + i * topk.row_stride;
  }
  bool sees(std::size_t b, std::int64_t i, std::int64_t j) const {
    if (window != 0 && j < window_start(b, i)) return false;
    if (topk.empty()) return true;
    const std::int64_t key = key_position[b] + j;
    return ((row_words(b, i)[key / 32] >> (key % 32)) & 1u) != 0;
  }
};

// One varlen attention: sequence b has queries [cu_q[b], cu_q[b+1]) and keys
// [cu_k[b], cu_k[b+1]). Causal masks are bottom-right aligned.
struct HostAttentionProblem {
  TensorView q;                                     // [Nq, H, dqk]
  TensorView k;                                     // [Nk, H, dqk], q's dtype
  TensorView v;                                     // [Nk, H, V], q's dtype
  const std::vector<std::int32_t>* cu_q = nullptr;  // [B+1]
  const std::vector<std::int32_t>* cu_k = nullptr;  // [B+1]
  bool causal = true;
  float scale = 1.0f;
  TensorView out;                  // [Nq, H, V] in the output dtype, or float8_e4m3 with out_scale
  std::optional<float> out_scale;  // fp8 output: out = saturate(value / out_scale)
  TensorView lse;                  // [H, Nq] float32, natural log; empty view: not written
  // float8_e4m3 inputs: each head's descale of q, k and v ([H] each, read
  // and checked on the host); empty for other dtypes.
  std::vector<float> q_descale, k_descale, v_descale;
  // §12: the keys each query sees beyond causality, and each head's sink
  // logit ([H], -inf for none; empty: no sinks), read and checked on the host.
  HostKeyMask mask;
  std::vector<float> sinks;
};

class HostBackend : public PrefillBackend {
 public:
  using PrefillBackend::PrefillBackend;

  void merge_attn_states(Queue& queue, const MergeArgs& args) const override;
  // Both host kernels write fp8 e4m3 output with a static per-tensor scale.
  bool supports_quant_output(QuantKey key) const override;
  // Both host kernels take top-k masks, windows and sinks.
  bool takes_attention_masks() const override { return true; }

 protected:
  // Every call and plan needs a host queue.
  void check_queue(const Queue& queue, const char* operation) const override;
  // One HostAttentionProblem over the plan's host lengths.
  void attend(Queue& queue, const AttentionCall& call) const override;
  // Called with arguments that passed the shared checks, on the host queue;
  // a merge's out_scale is a host value by then (never is_device()).
  virtual void attention(const HostAttentionProblem& problem) const = 0;
  // `sinks`: args.sinks read and checked ([H]; empty: none).
  virtual void merge(const MergeArgs& args, const std::vector<float>& sinks) const = 0;
};

}  // namespace mla::detail
