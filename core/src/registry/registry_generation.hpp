// Internal: a counter that every change to a backend registry bumps, so a
// cached selection can tell that the entry it chose may have been replaced.
#pragma once

#include <cstdint>

namespace mla::detail {

std::uint64_t registry_generation();

}  // namespace mla::detail
