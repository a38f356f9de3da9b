// Helpers of the KOKKOS-specific tests: backends built from the library's own
// entries, and one comparison of KOKKOS against REFERENCE on random data.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "builtin_entries.hpp"
#include "conformance/test_tensors.hpp"

namespace mla::testing {

inline BackendParams kokkos_params(MlaDims dims, int heads, DType dtype) {
  BackendParams params;
  params.num_heads = heads;
  params.dims = dims;
  params.dtype = dtype;
  return params;
}

// New tokens with per-sequence query and key lengths (causal unless told);
// KOKKOS output (into a NaN-poisoned buffer) and LSE compared with
// REFERENCE, by default to the contract's tolerance of the dtype.
inline ::testing::AssertionResult kokkos_matches_reference(const BackendParams& params, const std::vector<int>& q_lens,
                                                           const std::vector<int>& k_lens, std::uint64_t seed,
                                                           std::optional<Tolerance> tolerance = std::nullopt,
                                                           bool causal = true) {
  Queue queue = Queue::host();
  const PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, k_lens, causal);
  const std::int64_t nq = meta.num_q_tokens(), nk = meta.num_k_tokens(), heads = params.num_heads;
  const std::int64_t dqk = params.dims.qk_head_dim(), dv = params.dims.v_head_dim;
  std::mt19937_64 rng(seed);
  HostTensor q(params.dtype, {nq, heads, dqk}), k(params.dtype, {nk, heads, dqk}), v(params.dtype, {nk, heads, dv});
  q.fill_random(rng, -2.0f, 2.0f);
  k.fill_random(rng, -2.0f, 2.0f);
  v.fill_random(rng, -1.0f, 1.0f);
  HostTensor out(params.dtype, {nq, heads, dv});
  const float scale = 1.0f / std::sqrt(static_cast<float>(dqk));

  auto kokkos = detail::kokkos_backend_entry().factory(params);
  kokkos->prepare(queue, meta);
  const AttentionResult got = kokkos->run_new_tokens(queue, q.view(), k.view(), v.view(), scale, true, out.view());
  auto reference = detail::reference_backend_entry().factory(params);
  reference->prepare(queue, meta);
  const AttentionResult ref = reference->run_new_tokens(queue, q.view(), k.view(), v.view(), scale, true);
  return results_match(got.out, got.lse, ref.out, ref.lse, tolerance.value_or(tolerance_for(params.dtype)));
}

}  // namespace mla::testing
