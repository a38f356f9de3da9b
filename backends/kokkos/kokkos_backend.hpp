// The KOKKOS backend: FlashAttention-2 written against the Kokkos API only,
// so one source serves every Kokkos build (Serial, OpenMP, Threads, ...).
// It runs on the host queue on Kokkos' default host execution space.
#pragma once

#include <string>

#include "host/host_backend.hpp"

namespace mla::kokkos {

class KokkosBackend final : public detail::HostBackend {
 public:
  // Initialises Kokkos unless the application already did (kokkos_runtime.hpp).
  explicit KokkosBackend(const BackendParams& params);
  std::string name() const override { return "KOKKOS"; }
  // The kernel variant (host_isa.hpp) a call would run now, and why.
  std::string kernel_info() const override;
  // The up-projection as a register-blocked GEMM (projection.cpp).
  void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                       const TensorView& v) const override;

 protected:
  // Kernels run on Kokkos' default host execution space, which reads the
  // memory of the host queue; GPU queues are refused.
  void attention(const detail::HostAttentionProblem& problem) const override;
  void merge(const MergeArgs& args, const std::vector<float>& sinks) const override;
};

}  // namespace mla::kokkos
