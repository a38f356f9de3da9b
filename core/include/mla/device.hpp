// The vocabulary of devices: vendor, capability, AMD gfx names. Plain data and
// pure functions; finding out which device this machine has is the platform
// layer's job (mla/platform.hpp), which builds on this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace mla {

enum class Vendor { nvidia, amd, host };

// "nvidia", "amd", "host".
std::string_view vendor_name(Vendor vendor);

struct DeviceCapability {
  Vendor vendor = Vendor::host;
  int major = 0;  // NVIDIA: compute capability; AMD: from the gfx name (docs/contract.md §11)
  int minor = 0;
  bool capability_known = true;               // false when a GPU's arch could not be read
  std::string arch = "host";                  // "sm_90", "gfx90a", "host"
  std::string name = "host";                  // marketing name from the runtime, or "simulated ..."
  int multiprocessors = 0;                    // SMs or CUs
  int warp_size = 1;                          // 32 on NVIDIA, 64 on gfx9, 32 on gfx1x
  std::uint64_t memory_bytes = 0;             // global memory
  std::uint64_t shared_memory_per_block = 0;  // shared memory / LDS per block
  bool simulated = false;                     // came from MLA_PLATFORM, not from a runtime

  // major * 10 + minor, vLLM's to_int(): 90 for 9.0, 100 for 10.0.
  int as_int() const { return major * 10 + minor; }
  // "9.0"; "unknown" when not known; "host" on the host.
  std::string capability_string() const;
  // "nvidia sm_90 (capability 9.0)", "amd gfx90a (capability 9.0)", "host"
  std::string describe() const;
};

// Strips feature suffixes: "gfx90a:sramecc+:xnack-" -> "gfx90a".
std::string strip_amd_features(std::string_view gcn_arch_name);

// gfx90a -> (9, 0), gfx942 -> (9, 4), gfx1100 -> (11, 0); nullopt when the
// name is not gfx followed by 2-4 hex-ish digits.
std::optional<std::pair<int, int>> amd_arch_capability(std::string_view arch);

// The host platform (vendor host, capability known, arch "host").
DeviceCapability host_capability();

}  // namespace mla
