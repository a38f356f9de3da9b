// The KOKKOS backend: FlashAttention-2 written against the Kokkos API only,
// so one source serves every Kokkos build (Serial, OpenMP, Threads, ...).
// It runs on the host queue on Kokkos' default host execution space.
#pragma once

#include <optional>
#include <string>

#include "mla/backend.hpp"

namespace mla::kokkos {

class KokkosBackend final : public PrefillBackend {
 public:
  // Initialises Kokkos unless the application already did (kokkos_runtime.hpp).
  explicit KokkosBackend(const BackendParams& params);

  std::string name() const override { return "KOKKOS"; }
  void prepare(Queue& queue, const PrefillMetadata& metadata) override;
  AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                 bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<float> out_scale = std::nullopt) override;
  AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                    const TensorView& v) override;
  void merge_attn_states(Queue& queue, const MergeArgs& args) override;
  bool supports_quant_output(QuantKey key) const override;
};

}  // namespace mla::kokkos
