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
};

class HostBackend : public PrefillBackend {
 public:
  using PrefillBackend::PrefillBackend;

  void merge_attn_states(Queue& queue, const MergeArgs& args) const override;
  // Both host kernels write fp8 e4m3 output with a static per-tensor scale.
  bool supports_quant_output(QuantKey key) const override;

 protected:
  // Every call and plan needs a host queue.
  void check_queue(const Queue& queue, const char* operation) const override;
  // One HostAttentionProblem over the plan's host lengths.
  void attend(Queue& queue, const AttentionCall& call) const override;
  // Called with arguments that passed the shared checks, on the host queue;
  // a merge's out_scale is a host value by then (never is_device()).
  virtual void attention(const HostAttentionProblem& problem) const = 0;
  virtual void merge(const MergeArgs& args) const = 0;
};

}  // namespace mla::detail
