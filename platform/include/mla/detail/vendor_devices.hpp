// Internal: the vendor runtimes' device lists. Each function is defined in the
// one source its vendor build compiles (platform/src/cuda_devices.cu,
// hip_devices.hip), so platform.cpp stays free of vendor headers and calls
// only what was built; the GPU queue (backends/cuda_hip/gpu_queue.cu) reads
// its device's capability from the same list.
#pragma once

#include <vector>

#include "mla/platform.hpp"

namespace mla {

// Both return an empty list, never throw, when there is no driver or no device.
#if MLA_WITH_CUDA
std::vector<DeviceCapability> detect_cuda_devices();
#endif
#if MLA_WITH_HIP
std::vector<DeviceCapability> detect_hip_devices();
#endif

}  // namespace mla
