// Which AMD devices HIP_FLASH runs on: one predicate, read by the entry (the
// selector's capability check) and by the backend when it is handed a queue,
// over the one list of MFMA targets (mfma_targets.def).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hip/flash_config.hpp"
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

// Which rows of the tile table a target's kernels use (flash_config.hpp):
// CDNA3's for gfx940-942 and for gfx950 (CDNA4, unmeasured), CDNA1/2's for
// every other name (gfx908, gfx90a, and a device that is not AMD).
inline TileFamily tile_family(std::string_view arch) {
  const bool cdna3 = arch.size() == 6 && (arch.substr(0, 5) == "gfx94" || arch.substr(0, 5) == "gfx95");
  return cdna3 ? TileFamily::cdna3 : TileFamily::cdna12;
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

// float8_e4m3 inputs: CDNA3's v_mfma_f32_32x32x16_fp8_fp8 (gfx940-942), which
// reads FNUZ e4m3 (the kernel converts OCP bytes as it stages them). gfx950
// reads OCP bytes with other instructions: not served yet.
inline bool is_e4m3_arch(std::string_view arch) { return arch == "gfx940" || arch == "gfx941" || arch == "gfx942"; }

inline bool supports_e4m3_inputs(const DeviceCapability& device) {
  return supports_device(device) && is_e4m3_arch(device.arch);
}

// Empty when supports_e4m3_inputs(device); otherwise why not.
inline std::string e4m3_device_gap(const DeviceCapability& device) {
  if (supports_e4m3_inputs(device)) return {};
  if (!supports_device(device)) return device_gap(device);
  return "fp8 inputs need CDNA3's fp8 MFMA (gfx940, gfx941, gfx942); the queue's device is " + device.describe();
}

// "gfx90a,gfx908" -> {"gfx90a", "gfx908"}.
inline std::vector<std::string> split_arch_list(std::string_view list) {
  std::vector<std::string> archs;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view arch = list.substr(0, comma);
    if (!arch.empty()) archs.emplace_back(arch);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return archs;
}

// What a HIP build holds, as comma lists (CMake passes them to the entry):
// the gfx targets in the library's code objects, those whose device code a
// newer clang compiled beside it for inspection only
// (cmake/MlaHipDeviceCode.cmake), the candidates the configure step tried,
// and those its HIP compiler accepts but the build leaves out, with why
// (cmake/MlaHip.cmake: gfx908 under clang 19).
struct BuildTargets {
  std::string_view compiled;
  std::string_view inspected;
  std::string_view candidates;
  std::string_view dropped = {};
  std::string_view dropped_reason = {};
};

// Empty when the build has a code object for `arch`; otherwise why not.
inline std::string code_object_gap(const std::string& arch, const BuildTargets& build) {
  const auto listed = [&arch](std::string_view list) {
    for (const std::string& each : split_arch_list(list)) {
      if (each == arch) return true;
    }
    return false;
  };
  if (listed(build.compiled)) return {};
  // Appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict on
  // chains of "literal" + std::string.
  std::string reason = "no HIP code object for ";
  reason += arch;
  reason += "; this build targets ";
  std::string built;
  for (const std::string& each : split_arch_list(build.compiled)) {
    if (!built.empty()) built += ", ";
    built += each;
  }
  reason += built.empty() ? std::string("no gfx arch") : built;
  if (listed(build.dropped)) {
    reason += " (";
    reason += arch;
    reason += " ";
    reason += build.dropped_reason;
    reason += ")";
  } else if (listed(build.inspected)) {
    reason += " (";
    reason += arch;
    reason += " device code was compiled by a newer clang for inspection only; the HIP compiler rejects ";
    reason += arch;
    reason += ": configure with a ROCm whose HIP compiler accepts it)";
  } else if (listed(build.candidates)) {
    reason += " (no compiler of this build accepts ";
    reason += arch;
    reason += ": configure with a ROCm whose HIP compiler does)";
  } else {
    reason += " (not among MLA_HIP_CANDIDATE_ARCHITECTURES)";
  }
  return reason;
}

}  // namespace mla::hip_flash
