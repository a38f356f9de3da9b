// Who owns Kokkos' lifetime. The library initialises Kokkos on first use only
// when the application has not, and then finalises it once at process exit;
// an application that initialised Kokkos itself keeps full control of it.
#pragma once

namespace mla::kokkos {

// Initialises Kokkos unless it already is. Raises Error(not_supported) when
// the application has already finalised Kokkos (it cannot be restarted).
// Safe to call from several threads.
void ensure_initialized();

// True when ensure_initialized() started Kokkos and so will finalise it at exit.
bool initialized_by_library();

}  // namespace mla::kokkos
