// Whether a CUDA build's code objects can run on a device: the host half of
// the double gating (the device half is the capability predicate plus the
// kernels' own arch). Pure string logic, compiled in every build and tested on
// the host.
#pragma once

#include <string>
#include <string_view>

#include "mla/platform.hpp"

namespace mla::cuda_flash {

// `architectures` is CMAKE_CUDA_ARCHITECTURES with ',' or ';' between entries:
// "80,90", "80-real,90-virtual", "90a", "all", "native". A device runs a build
// when an entry carries SASS of its major version at or below its minor
// ("80" covers 8.6; an arch-specific "90a" only 9.0) or PTX at or below its
// capability (the driver compiles it). "all", "all-major" and "native" are
// taken as covering.
bool architectures_cover(std::string_view architectures, const DeviceCapability& device);

// "no code in this build for sm_75 (CUDA architectures 80,90)", for messages.
std::string architectures_gap(std::string_view architectures, const DeviceCapability& device);

}  // namespace mla::cuda_flash
