// KokkosBackend: the kernels of flash_attention.cpp and merge_states.cpp in the
// shared host-backend shell (argument checks, results, host-queue guard).
#include "kokkos_backend.hpp"

#include <mutex>

#include "flash_attention.hpp"
#include "host_isa.hpp"
#include "host_parallel.hpp"
#include "kokkos_runtime.hpp"
#include "mla/backend/checks.hpp"
#include "mla/backend/latents.hpp"
#include "mla/error.hpp"

namespace mla::kokkos {
namespace {

// Kokkos' Serial space (the one Debian's Kokkos has) is one process-wide
// instance that Kokkos does not promise to share between threads; with
// Serial as the default host space, calls take turns on this lock. A
// host-parallel space (OpenMP, Threads) takes no lock: host_parallel.hpp
// says why concurrent calls are safe there.
class KernelTurn {
 public:
  KernelTurn() {
    if constexpr (!host_parallel_space) lock_ = std::unique_lock<std::mutex>(mutex());
  }

 private:
  static std::mutex& mutex() {
    static std::mutex lock;
    return lock;
  }
  std::unique_lock<std::mutex> lock_;
};

}  // namespace

KokkosBackend::KokkosBackend(const BackendParams& params) : HostBackend(params) { ensure_initialized(); }

// The application may have finalised Kokkos since construction; each call
// checks again (a no-op when it is running).
void KokkosBackend::attention(const detail::HostAttentionProblem& problem) const {
  ensure_initialized();
  const KernelTurn turn;
  flash_attention(problem);
}

std::string KokkosBackend::kernel_info() const {
  try {
    const HostIsa isa = selected_host_isa();
    const bool bf16_dot = selected_bf16_dot();
    return std::string(host_isa_name(isa)) + " variant" +
           (bf16_dot ? ", bf16 products on AVX512-BF16 (avx512_bf16)" : "") +
           (requested_host_isa() != nullptr ? " (set by MLA_KOKKOS_ISA)" : " (widest this CPU runs)") + "; " +
           projection_info();
  } catch (const Error& error) {
    return error.what();
  }
}

void KokkosBackend::project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                                    const TensorView& k, const TensorView& v) const {
  require_queue_kind(name(), "project_latents", {DeviceBackend::host}, queue);
  check_latent_projection(queue, latents, kv_b_proj, k, v);
  ensure_initialized();
  const KernelTurn turn;
  kokkos::project_latents(latents, kv_b_proj, k, v);
}

void KokkosBackend::merge(const MergeArgs& args, const std::vector<float>& sinks) const {
  ensure_initialized();
  const KernelTurn turn;
  merge_states(args, sinks);
}

}  // namespace mla::kokkos
