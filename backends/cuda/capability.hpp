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

// float8_e4m3 inputs: mma.sync m16n8k32 on e4m3 arrived with Ada (8.9) and
// is native on 8.9 and on 12.0 and newer. On 9.x-11.x (Hopper, data-center
// Blackwell) ptxas lowers it to other instructions and the kernel spills
// (ci/cuda-inspect: 255 registers and spills on sm_90 and sm_100, none on
// sm_89 and sm_120; inferred from ptxas' report, not measured on a GPU), so
// fp8 inputs there are HOPPER_FLASH's (wgmma) to take.
inline bool supports_e4m3_inputs(const DeviceCapability& device) {
  return supports_device(device) && ((device.major == 8 && device.minor >= 9) || device.major >= 12);
}

// Empty when supports_e4m3_inputs(device); otherwise why not.
inline std::string e4m3_device_gap(const DeviceCapability& device) {
  if (supports_e4m3_inputs(device)) return {};
  if (!supports_device(device)) return device_gap(device);
  return "fp8 inputs need compute capability 8.9, or 12.0 and newer (where mma.sync on e4m3 is native); the "
         "queue's device is " +
         device.describe();
}

}  // namespace mla::cuda_flash
