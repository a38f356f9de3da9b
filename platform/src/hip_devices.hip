// AMD devices as the HIP runtime reports them. A machine without the amdgpu
// driver (no /dev/kfd) or without a GPU is an ordinary host: the runtime's
// error (hipErrorNoDevice, hipErrorInsufficientDriver, ...) becomes an empty
// list and a debug line, never an exception.
#include <hip/hip_runtime.h>

#include <exception>
#include <string>
#include <vector>

#include "mla/config.hpp"
#include "mla/detail/vendor_devices.hpp"

namespace mla {
namespace {

void log_runtime_error(const char* call, hipError_t code) {
  log(LogLevel::debug, std::string("no HIP devices: ") + call + " failed: " + hipGetErrorString(code));
}

DeviceCapability describe_device(const hipDeviceProp_t& prop) {
  DeviceCapability device;
  device.vendor = Vendor::amd;
  // gcnArchName carries the target features ("gfx90a:sramecc+:xnack-"); the
  // chip name alone decides capability and which code object runs.
  device.arch = strip_amd_features(prop.gcnArchName);
  if (const auto capability = amd_arch_capability(device.arch)) {
    device.major = capability->first;
    device.minor = capability->second;
    device.capability_known = true;
  } else {
    // An arch name we cannot read: the selector falls back to the configured
    // default backend instead of guessing.
    device.capability_known = false;
  }
  device.name = prop.name;
  device.multiprocessors = prop.multiProcessorCount;
  device.warp_size = prop.warpSize;
  device.memory_bytes = prop.totalGlobalMem;
  device.shared_memory_per_block = prop.sharedMemPerBlock;  // LDS per workgroup
  return device;
}

}  // namespace

std::vector<DeviceCapability> detect_hip_devices() {
  std::vector<DeviceCapability> devices;
  try {
    int count = 0;
    const hipError_t status = hipGetDeviceCount(&count);
    if (status != hipSuccess) {
      (void)hipGetLastError();  // do not let the next checked call report it again
      log_runtime_error("hipGetDeviceCount", status);
      return {};
    }
    for (int index = 0; index < count; ++index) {
      hipDeviceProp_t prop{};
      const hipError_t prop_status = hipGetDeviceProperties(&prop, index);
      if (prop_status != hipSuccess) {
        (void)hipGetLastError();
        log_runtime_error("hipGetDeviceProperties", prop_status);
        continue;
      }
      devices.push_back(describe_device(prop));
    }
  } catch (const std::exception&) {
    // Only allocation or logging can throw here; a device list must not.
    return {};
  }
  return devices;
}

}  // namespace mla
