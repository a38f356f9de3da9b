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

// Whether the code the runtime loads on `device` (the SASS of its major with
// the highest minor at or below its own, else the highest PTX at or below its
// capability) is sm_89 or sm_120+, the archs whose fp8-input kernels are
// compiled (capability.hpp). "80,90" on an 8.9 device loads sm_80 code, on a
// 12.0 device compute_90 PTX: false for both.
bool architectures_run_e4m3(std::string_view architectures, const DeviceCapability& device);

// Empty when architectures_run_e4m3; otherwise "fp8 inputs on sm_89 need code
// for sm_89 in this build (CUDA architectures 80,90; add 89)".
std::string e4m3_code_gap(std::string_view architectures, const DeviceCapability& device);

// "no code in this build for sm_75 (CUDA architectures 80,90)", for messages.
std::string architectures_gap(std::string_view architectures, const DeviceCapability& device);

}  // namespace mla::cuda_flash
