// The KOKKOS kernels behind KokkosBackend, callable without the backend class
// (tests and benchmarks use them directly). Arguments are checked by the
// backend; these functions only require Kokkos to be initialised.
#pragma once

#include <string>

#include "host/host_backend.hpp"

namespace mla::kokkos {

// One varlen attention: sequence b has queries [cu_q[b], cu_q[b+1]) and keys
// [cu_k[b], cu_k[b+1]). Causal masks are bottom-right aligned: query i of a
// sequence with sq queries and sk keys sees keys j <= i + sk - sq.
using AttentionProblem = detail::HostAttentionProblem;

// FlashAttention-2 on Kokkos' default host execution space.
void flash_attention(const AttentionProblem& problem);

// docs/contract.md §3 on arguments that passed check_merge_args, with
// args.sinks read into `sinks` (§12; empty: none).
void merge_states(const MergeArgs& args, const std::vector<float>& sinks);

// The MLA step's up-projection (PrefillBackend::project_latents) on
// arguments that passed check_latent_projection (projection.cpp): on oneDNN
// where the build has it and it serves the call, else on the own GEMM.
void project_latents(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k, const TensorView& v);

// MLA_KOKKOS_PROJECTION, read on every call: unset or empty (automatic),
// own, or onednn (which fails a call oneDNN cannot serve with
// Error(not_supported) instead of falling back). Another value raises
// Error(config) naming the variable and the choices.
enum class ProjectionGemm { automatic, own, onednn };
ProjectionGemm requested_projection_gemm();

// Whether this build has the oneDNN projection (cmake/MlaOneDnn.cmake).
bool onednn_projection_built();

// One line for kernel_info(): which GEMM projects, and why.
std::string projection_info();

}  // namespace mla::kokkos
