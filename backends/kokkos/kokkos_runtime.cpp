// Kokkos lifetime policy; see kokkos_runtime.hpp.
//
// Finalisation runs from a std::atexit handler registered right after
// Kokkos::initialize returns. Handlers and static destructors run in reverse
// order of registration, so ours runs before the destructors of Kokkos' own
// statics (constructed earlier) and before those of any later-constructed
// static that might still hold a Kokkos view. The backend itself keeps no
// managed view between calls, so none is alive when the handler runs.
#include "kokkos_runtime.hpp"

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <mutex>

#include "mla/config.hpp"
#include "mla/error.hpp"

namespace mla::kokkos {
namespace {

std::mutex runtime_mutex;
bool library_owns_kokkos = false;

void finalize_at_exit() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  // The application may have finalised Kokkos itself in the meantime.
  if (library_owns_kokkos && Kokkos::is_initialized()) Kokkos::finalize();
  library_owns_kokkos = false;
}

}  // namespace

void ensure_initialized() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  if (Kokkos::is_initialized()) return;
  if (library_owns_kokkos) {
    raise(ErrorCategory::not_supported,
          "KOKKOS: Kokkos was finalized by the application while the library still used it");
  }
#if KOKKOS_VERSION >= 30700
  if (Kokkos::is_finalized()) {
    raise(ErrorCategory::not_supported, "KOKKOS: Kokkos has already been finalized and cannot be initialized again");
  }
#endif
  Kokkos::initialize();
  library_owns_kokkos = true;
  std::atexit(finalize_at_exit);
  log(LogLevel::debug, "KOKKOS: initialized Kokkos (execution space " +
                           std::string(Kokkos::DefaultHostExecutionSpace::name()) + "); it is finalized at exit");
}

bool initialized_by_library() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  return library_owns_kokkos;
}

}  // namespace mla::kokkos
