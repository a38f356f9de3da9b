// Which NVIDIA devices HOPPER_FLASH runs on: one predicate, read by the entry
// (the selector's capability check) and by the backend when it is handed a
// queue, so the two cannot disagree.
#pragma once

#include <string>

#include "mla/queue.hpp"

namespace mla::hopper_flash {

inline constexpr DeviceBackend queue_kind = DeviceBackend::cuda;

// wgmma and setmaxnreg exist only in the arch-specific sm_90a target, whose
// code runs on compute capability 9.0 and nothing else: not on 8.x, and not
// on 10.x or 12.x either (they lack wgmma).
inline bool supports_device(const DeviceCapability& device) {
  return device.vendor == Vendor::nvidia && device.major == 9 && device.minor == 0;
}

// Empty when supports_device(device); otherwise why not, for an error message.
inline std::string device_gap(const DeviceCapability& device) {
  if (supports_device(device)) return {};
  return "runs sm_90a code (wgmma, TMA, mbarriers), which only an NVIDIA GPU of compute capability 9.0 "
         "(H100, H200) executes; the queue's device is " +
         device.describe() + " (CUDA_FLASH serves it)";
}

}  // namespace mla::hopper_flash
