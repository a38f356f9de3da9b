// Internal to the backends layer and the tests: the explicit table of the
// library's own backends. Each backend
// folder defines its entry function in a source that is always compiled, so a
// backend that is compiled out still links and reports why it is unavailable.
#pragma once

#include "mla/backend.hpp"

namespace mla::detail {

// reference_backend_entry() in backends/reference, kokkos_backend_entry()
// in backends/kokkos, ... (mla/backend_members.def).
#define MLA_BACKEND_MEMBER(member, entry) BackendEntry entry();
#include "mla/backend/members.def"
#undef MLA_BACKEND_MEMBER

}  // namespace mla::detail
