// Internal to the backends layer and the tests: the explicit table of the
// library's own backends. Each backend
// folder defines its entry function in a source that is always compiled, so a
// backend that is compiled out still links and reports why it is unavailable.
#pragma once

#include "mla/backend.hpp"

namespace mla::detail {

BackendEntry reference_backend_entry();   // backends/reference
BackendEntry kokkos_backend_entry();      // backends/kokkos
BackendEntry cuda_flash_backend_entry();  // backends/cuda
BackendEntry hip_flash_backend_entry();   // backends/hip

}  // namespace mla::detail
