// The REFERENCE backend: exact attention on the host, the oracle every other
// backend is tested against. Inputs are read in their own dtype, every sum is
// accumulated in fp64, and only the final value is rounded to the output dtype.
// It reads memory directly, so it runs on the host queue only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mla/backend.hpp"

namespace mla::reference {

// One varlen attention: sequence b has queries [cu_q[b], cu_q[b+1]) and keys
// [cu_k[b], cu_k[b+1]). Causal masks are bottom-right aligned.
struct AttentionProblem {
  TensorView q;                                     // [Nq, H, dqk]
  TensorView k;                                     // [Nk, H, dqk]
  TensorView v;                                     // [Nk, H, V]
  const std::vector<std::int32_t>* cu_q = nullptr;  // [B+1]
  const std::vector<std::int32_t>* cu_k = nullptr;  // [B+1]
  bool causal = true;
  double scale = 1.0;
  TensorView out;                  // [Nq, H, V]; float8_e4m3 when out_scale is set
  std::optional<float> out_scale;  // fp8 output: out = saturate(value / out_scale)
  TensorView lse;                  // [H, Nq] float32, or an empty view
};

void attention(const AttentionProblem& problem);

// CONTRACT.md §3 on arguments that passed check_merge_args.
void merge(const MergeArgs& args);

class ReferenceBackend final : public PrefillBackend {
 public:
  explicit ReferenceBackend(const BackendParams& params) : PrefillBackend(params) {}

  std::string name() const override { return "REFERENCE"; }
  void prepare(Queue& queue, const PrefillMetadata& metadata) override;
  AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                 bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<float> out_scale = std::nullopt) override;
  AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                    const TensorView& v) override;
  void merge_attn_states(Queue& queue, const MergeArgs& args) override;
  bool supports_quant_output(QuantKey key) const override;
};

}  // namespace mla::reference
