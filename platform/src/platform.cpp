// Device capability: vendor runtimes when built in, simulated platforms from
// MLA_PLATFORM, and the host.
#include "mla/platform.hpp"

#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "mla/detail/vendor_devices.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

constexpr std::string_view accepted_platform_forms =
    "accepted forms: host, nvidia (capability unknown), nvidia:<major>.<minor> (e.g. nvidia:9.0, "
    "nvidia:10.0), amd (capability unknown), amd:<gfx arch> (e.g. amd:gfx942, amd:gfx90a:sramecc+:xnack-)";

// Per-block shared memory a kernel gets without opting in (NVIDIA) and the LDS
// of a workgroup (AMD); what a simulated device reports.
constexpr std::uint64_t nvidia_default_shared_memory = 48 * 1024;
constexpr std::uint64_t amd_lds_per_workgroup = 64 * 1024;

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

[[noreturn]] void bad_platform(std::string_view spec, std::string_view why) {
  raise(ErrorCategory::config, "Invalid MLA_PLATFORM value '" + std::string(spec) + "': " + std::string(why) + "; " +
                                   std::string(accepted_platform_forms));
}

// "9.0" -> (9, 0); one or two digits for the major, one for the minor, as
// vLLM's DeviceCapability.to_int() packs them.
std::optional<std::pair<int, int>> parse_capability(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 2 || text.size() != dot + 2) return std::nullopt;
  int major = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    major = major * 10 + (text[i] - '0');
  }
  if (!std::isdigit(static_cast<unsigned char>(text[dot + 1]))) return std::nullopt;
  return std::pair{major, text[dot + 1] - '0'};
}

DeviceCapability simulated(Vendor vendor) {
  DeviceCapability device;
  device.vendor = vendor;
  device.simulated = true;
  device.capability_known = false;
  device.arch = "unknown";
  device.name = "simulated " + std::string(vendor_name(vendor)) + " device";
  device.warp_size = vendor == Vendor::amd ? 64 : 32;
  device.shared_memory_per_block = vendor == Vendor::amd ? amd_lds_per_workgroup : nvidia_default_shared_memory;
  return device;
}

}  // namespace

DeviceCapability parse_platform(std::string_view spec) {
  const std::string_view text = trim(spec);
  const auto colon = text.find(':');
  const std::string vendor = lower(text.substr(0, colon));
  const std::string_view detail = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);

  if (vendor == "host") {
    if (colon != std::string_view::npos) bad_platform(spec, "the host has no capability to give");
    DeviceCapability host = host_capability();
    host.simulated = true;
    return host;
  }
  if (vendor != "nvidia" && vendor != "amd") bad_platform(spec, "unknown vendor '" + vendor + "'");

  DeviceCapability device = simulated(vendor == "nvidia" ? Vendor::nvidia : Vendor::amd);
  if (colon == std::string_view::npos) return device;  // vendor alone: capability unknown
  if (detail.empty()) bad_platform(spec, "nothing after ':'");

  if (device.vendor == Vendor::nvidia) {
    const auto capability = parse_capability(detail);
    if (!capability) bad_platform(spec, "expected an NVIDIA compute capability like 9.0");
    device.major = capability->first;
    device.minor = capability->second;
    device.arch = "sm_" + std::to_string(device.as_int());
  } else {
    const auto capability = amd_arch_capability(detail);
    if (!capability) bad_platform(spec, "expected an AMD gfx arch like gfx942");
    device.major = capability->first;
    device.minor = capability->second;
    device.arch = strip_amd_features(detail);
    // Wave64 through gfx9 (CDNA included); RDNA (gfx10 and later) runs wave32.
    device.warp_size = device.major <= 9 ? 64 : 32;
  }
  device.capability_known = true;
  device.name = "simulated " + device.arch;
  return device;
}

std::vector<DeviceCapability> detect_devices() {
#if MLA_WITH_CUDA
  return detect_cuda_devices();
#elif MLA_WITH_HIP
  return detect_hip_devices();
#else
  return {};
#endif
}

DeviceCapability current_platform() {
  if (const char* spec = std::getenv("MLA_PLATFORM"); spec != nullptr && *spec != '\0') {
    return parse_platform(spec);
  }
  // Enumerating devices initialises the vendor runtime, so it happens once.
  static const std::vector<DeviceCapability> devices = detect_devices();
  return devices.empty() ? host_capability() : devices.front();
}

std::string describe_platform(const DeviceCapability& platform) {
  std::string text = platform.describe();
  if (platform.simulated) {
    const char* spec = std::getenv("MLA_PLATFORM");
    text += std::string(", simulated by MLA_PLATFORM=") + (spec ? spec : "?");
  } else if (platform.vendor == Vendor::host) {
    text += " (no GPU in this build or on this machine)";
  } else {
    text += " \"" + platform.name + "\"";
  }
  return text;
}

}  // namespace mla
