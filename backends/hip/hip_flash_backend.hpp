// Internal: the HIP_FLASH backend's constructor, defined only in HIP builds.
// entry.cpp calls it and stays free of HIP headers.
#pragma once

#include <memory>

#include "mla/backend.hpp"

namespace mla::hip {

std::unique_ptr<PrefillBackend> make_hip_flash_backend(const BackendParams& params);

}  // namespace mla::hip
