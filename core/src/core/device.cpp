// The device vocabulary's functions: names and descriptions of a capability,
// and the host's own entry.
#include <string>
#include <thread>

#include "mla/queue.hpp"

namespace mla {

std::string_view vendor_name(Vendor vendor) {
  switch (vendor) {
    case Vendor::nvidia:
      return "nvidia";
    case Vendor::amd:
      return "amd";
    case Vendor::host:
      return "host";
  }
  return "unknown";
}

std::string DeviceCapability::capability_string() const {
  if (!capability_known) return "unknown";
  if (vendor == Vendor::host) return "host";  // the host has no capability number to report
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string DeviceCapability::describe() const {
  if (vendor == Vendor::host) return "host";
  std::string text(vendor_name(vendor));
  if (!capability_known) return text + " (capability unknown)";
  return text + " " + arch + " (capability " + capability_string() + ")";
}

DeviceCapability host_capability() {
  DeviceCapability host;
  host.vendor = Vendor::host;
  host.capability_known = true;
  host.arch = "host";
  host.name = "host";
  host.warp_size = 1;
  host.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
  return host;
}

}  // namespace mla
