// KokkosBackend: the kernels of flash_attention.cpp and merge_states.cpp in the
// shared host-backend shell (argument checks, results, host-queue guard).
#include "kokkos_backend.hpp"

#include "flash_attention.hpp"
#include "kokkos_runtime.hpp"

namespace mla::kokkos {

KokkosBackend::KokkosBackend(const BackendParams& params) : HostBackend(params) { ensure_initialized(); }

// The application may have finalised Kokkos since construction; each call
// checks again (a no-op when it is running).
void KokkosBackend::attention(const detail::HostAttentionProblem& problem) {
  ensure_initialized();
  flash_attention(problem);
}

void KokkosBackend::merge(const MergeArgs& args) {
  ensure_initialized();
  merge_states(args);
}

}  // namespace mla::kokkos
