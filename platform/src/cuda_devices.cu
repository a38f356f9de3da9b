// NVIDIA devices as the CUDA runtime reports them. A machine without a driver,
// with a driver older than the runtime, or without a GPU is an ordinary host:
// the runtime's error becomes an empty list (and a debug line), never an exception.
#include <cuda_runtime.h>

#include <exception>
#include <string>
#include <vector>

#include "mla/config.hpp"
#include "mla/detail/vendor_devices.hpp"

namespace mla {
namespace {

void log_runtime_error(const char* call, cudaError_t code) {
  log(LogLevel::debug, std::string("no CUDA devices: ") + call + " failed: " + cudaGetErrorString(code));
}

DeviceCapability describe_device(const cudaDeviceProp& prop) {
  DeviceCapability device;
  device.vendor = Vendor::nvidia;
  device.major = prop.major;
  device.minor = prop.minor;
  device.capability_known = true;
  device.arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  device.name = prop.name;
  device.multiprocessors = prop.multiProcessorCount;
  device.warp_size = prop.warpSize;
  device.memory_bytes = prop.totalGlobalMem;
  // The opt-in limit: kernels that ask for it (cudaFuncSetAttribute) may use this much.
  device.shared_memory_per_block = prop.sharedMemPerBlockOptin;
  return device;
}

}  // namespace

std::vector<DeviceCapability> detect_cuda_devices() {
  std::vector<DeviceCapability> devices;
  try {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      // "no CUDA-capable device", "driver version is insufficient", ...: not
      // sticky, but clear it so later calls do not report it again.
      (void)cudaGetLastError();
      log_runtime_error("cudaGetDeviceCount", status);
      return {};
    }
    for (int index = 0; index < count; ++index) {
      cudaDeviceProp prop{};
      const cudaError_t prop_status = cudaGetDeviceProperties(&prop, index);
      if (prop_status != cudaSuccess) {
        (void)cudaGetLastError();
        log_runtime_error("cudaGetDeviceProperties", prop_status);
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
