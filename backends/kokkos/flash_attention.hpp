// The KOKKOS kernels behind KokkosBackend, callable without the backend class
// (tests and benchmarks use them directly). Arguments are checked by the
// backend; these functions only require Kokkos to be initialised.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mla/backend.hpp"

namespace mla::kokkos {

// One varlen attention: sequence b has queries [cu_q[b], cu_q[b+1]) and keys
// [cu_k[b], cu_k[b+1]). Causal masks are bottom-right aligned: query i of a
// sequence with sq queries and sk keys sees keys j <= i + sk - sq.
struct AttentionProblem {
  TensorView q;  // [Nq, H, dqk] float32 / float16 / bfloat16
  TensorView k;  // [Nk, H, dqk] same dtype
  TensorView v;  // [Nk, H, V]   same dtype
  const std::vector<std::int32_t>* cu_q = nullptr;  // [B+1]
  const std::vector<std::int32_t>* cu_k = nullptr;  // [B+1]
  bool causal = true;
  float scale = 1.0f;
  TensorView out;                  // [Nq, H, V] dtype of q, or float8_e4m3 with out_scale
  std::optional<float> out_scale;  // fp8 output: out = saturate(value / out_scale)
  TensorView lse;                  // [H, Nq] float32, natural log; empty view: not written
};

// FlashAttention-2 on Kokkos' default host execution space.
void flash_attention(const AttentionProblem& problem);

// CONTRACT.md §3 on arguments that passed check_merge_args.
void merge_states(const MergeArgs& args);

}  // namespace mla::kokkos
