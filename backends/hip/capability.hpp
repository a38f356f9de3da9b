// Which AMD devices HIP_FLASH runs on: one predicate, read by the entry (the
// selector's capability check) and by the backend when it is handed a queue,
// over the one list of MFMA targets (mfma_targets.def).
#pragma once

#include <string>
#include <string_view>

#include "mla/queue.hpp"

namespace mla::hip_flash {

// The queue kind the kernels are launched on (the entry's queue_kinds and the
// backend's per-call check).
inline constexpr DeviceBackend queue_kind = DeviceBackend::hip;

inline constexpr std::string_view mfma_targets[] = {
#define MLA_MFMA_TARGET(arch) #arch,
#include "hip/mfma_targets.def"
#undef MLA_MFMA_TARGET
};

inline bool is_mfma_target(std::string_view arch) {
  for (const std::string_view target : mfma_targets) {
    if (target == arch) return true;
  }
  return false;
}

// An AMD device whose gfx arch is one of the MFMA targets. Unknown capability:
// no. DeviceCapability::arch is already the bare name (detection and
// parse_platform strip ":xnack-" and the like), as the code-object check of
// the entry also assumes.
inline bool supports_device(const DeviceCapability& device) {
  return device.vendor == Vendor::amd && device.capability_known && is_mfma_target(device.arch);
}

// "gfx908, gfx90a, ..." for messages.
inline std::string mfma_target_list() {
  std::string text;
  for (const std::string_view target : mfma_targets) text += (text.empty() ? "" : ", ") + std::string(target);
  return text;
}

// Empty when supports_device(device); otherwise why not, for an error message.
inline std::string device_gap(const DeviceCapability& device) {
  if (supports_device(device)) return {};
  return "needs an AMD GPU with the MFMA kernel's gfx arch (" + mfma_target_list() + "); the queue's device is " +
         device.describe();
}

}  // namespace mla::hip_flash
