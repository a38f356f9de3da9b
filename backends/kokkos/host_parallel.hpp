// How the KOKKOS kernels spread independent work items over host threads.
//
// Kokkos' default host execution space is Serial (Debian's Kokkos) or a
// host-parallel one (OpenMP or Threads, in a Kokkos built with it). In
// Kokkos 3.4 the host-parallel spaces start parallel work only from the
// thread that initialised Kokkos (its "master"): OpenMP runs a range from any
// other thread inline on that thread, Threads throws. So a call on the master
// thread fans out over all of the space's threads, and a call on any other
// thread runs its items in a plain loop on that thread. Neither waits for the
// other, and no Kokkos state is shared between them: the kernels keep their
// scratch per OS thread (thread_scratch) and hold no Kokkos views.
//
// Serial gives no such guarantee (one process-wide instance), so the backend
// lets one call at a time into a Serial-only build (kokkos_backend.cpp).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace mla::kokkos {

// Kokkos makes OpenMP, else Threads, the default host space whenever it has one.
#if defined(KOKKOS_ENABLE_OPENMP) || defined(KOKKOS_ENABLE_THREADS)
inline constexpr bool host_parallel_space = true;
#else
inline constexpr bool host_parallel_space = false;
#endif

// True when this thread may start parallel work on the default host space.
inline bool may_dispatch_parallel() {
#if defined(KOKKOS_ENABLE_OPENMP)
  if constexpr (std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>)
    return !Kokkos::OpenMP::in_parallel();
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  // Kokkos 3.4 names its master thread only through this internal call.
  if constexpr (std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::Threads>) {
    return Kokkos::Impl::ThreadsExec::is_process() && !Kokkos::Threads::in_parallel();
  }
#endif
  return true;
}

// Runs body(i) for every i in [0, count), each item on one thread, on a
// dynamic schedule with chunks of one: in Kokkos 3.4 each thread starts on its
// own contiguous share of the list and, when done, takes single items from
// the others' shares. A list sorted longest first ends every share on short
// items, so no thread sits idle behind a long straggler. The caller's results
// must not depend on which thread ran an item (the kernels' do not: each item
// is computed alone).
template <class Body>
void for_each_item(const char* label, std::int64_t count, const Body& body) {
  if (count <= 0) return;
  if (host_parallel_space && !may_dispatch_parallel()) {
    for (std::int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  using Policy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>,
                                     Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for(label, Policy(0, count).set_chunk_size(1), body);
  Kokkos::fence();
}

// Scratch of at least `floats` floats, 64-byte aligned, owned by the calling
// OS thread and reused by its later items and calls: concurrent calls never
// share it.
float* thread_scratch(std::size_t floats);

}  // namespace mla::kokkos
