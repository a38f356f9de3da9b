// Which NVIDIA devices CUDA_FLASH runs on: one predicate, read by the entry
// (the selector's capability check) and by the backend when it is handed a
// queue (the dispatch's device check), so the two cannot disagree.
#pragma once

#include <string>

#include "mla/queue.hpp"

namespace mla::cuda_flash {

// The queue kind the kernels are launched on (the entry's queue_kinds and the
// backend's per-call check).
inline constexpr DeviceBackend queue_kind = DeviceBackend::cuda;

// mma.sync m16n8k16 with bf16 operands and cp.async arrived with Ampere (8.0).
inline constexpr int min_compute_major = 8;

inline bool supports_device(const DeviceCapability& device) {
  return device.vendor == Vendor::nvidia && device.major >= min_compute_major;
}

// Empty when supports_device(device); otherwise why not, for an error message.
inline std::string device_gap(const DeviceCapability& device) {
  if (supports_device(device)) return {};
  return "needs an NVIDIA GPU of compute capability " + std::to_string(min_compute_major) +
         ".0 or newer; the queue's device is " + device.describe();
}

}  // namespace mla::cuda_flash
