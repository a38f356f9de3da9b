#include "arch_coverage.hpp"

#include <cctype>
#include <vector>

namespace mla::cuda_flash {
namespace {

struct ArchEntry {
  int major = 0;
  int minor = 0;
  bool specific = false;  // "90a": SASS for exactly this capability
  bool sass = true;
  bool ptx = true;
};

std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> items;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    std::size_t end = list.find_first_of(",;", begin);
    if (end == std::string_view::npos) end = list.size();
    if (end > begin) items.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

// "86", "90a-real", "120-virtual"; false for anything else.
bool parse_entry(std::string_view item, ArchEntry& entry) {
  std::size_t digits = 0;
  while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits]))) ++digits;
  if (digits < 2) return false;
  int number = 0;
  for (std::size_t i = 0; i < digits; ++i) number = number * 10 + (item[i] - '0');
  entry.major = number / 10;
  entry.minor = number % 10;
  std::string_view rest = item.substr(digits);
  if (!rest.empty() && (rest.front() == 'a' || rest.front() == 'f')) {
    entry.specific = true;
    rest.remove_prefix(1);
  }
  if (rest == "-real") {
    entry.ptx = false;
  } else if (rest == "-virtual") {
    entry.sass = false;
  } else if (!rest.empty()) {
    return false;
  }
  return true;
}

}  // namespace

bool architectures_cover(std::string_view architectures, const DeviceCapability& device) {
  if (device.vendor != Vendor::nvidia) return false;
  const int capability = device.major * 10 + device.minor;
  for (std::string_view item : split(architectures)) {
    if (item == "all" || item == "all-major" || item == "native") return true;
    ArchEntry entry;
    if (!parse_entry(item, entry)) continue;
    const int arch = entry.major * 10 + entry.minor;
    if (entry.sass) {
      const bool same_major = entry.major == device.major && entry.minor <= device.minor;
      if (entry.specific ? arch == capability : same_major) return true;
    }
    // Arch-specific PTX (compute_90a) only JIT-compiles for that very arch.
    if (entry.ptx && (entry.specific ? arch == capability : arch <= capability)) return true;
  }
  return false;
}

bool architectures_run_e4m3(std::string_view architectures, const DeviceCapability& device) {
  if (device.vendor != Vendor::nvidia) return false;
  const int capability = device.major * 10 + device.minor;
  int sass = -1;  // the SASS the runtime loads: same major, the highest minor at or below the device's
  int ptx = -1;   // else the highest PTX at or below the capability, compiled by the driver
  for (std::string_view item : split(architectures)) {
    if (item == "all" || item == "all-major" || item == "native") return true;
    ArchEntry entry;
    if (!parse_entry(item, entry)) continue;
    const int arch = entry.major * 10 + entry.minor;
    if (entry.sass && (entry.specific ? arch == capability : entry.major == device.major && arch <= capability)) {
      sass = arch > sass ? arch : sass;
    }
    if (entry.ptx && (entry.specific ? arch == capability : arch <= capability)) ptx = arch > ptx ? arch : ptx;
  }
  const int loaded = sass >= 0 ? sass : ptx;
  return loaded == 89 || loaded >= 120;
}

std::string e4m3_code_gap(std::string_view architectures, const DeviceCapability& device) {
  if (architectures_run_e4m3(architectures, device)) return {};
  return "fp8 inputs on " + device.arch + " need code for " + (device.major == 8 ? "sm_89" : "sm_120 or newer") +
         " in this build (CUDA architectures " + std::string(architectures) + "; add " +
         (device.major == 8 ? "89" : "120") + ")";
}

std::string architectures_gap(std::string_view architectures, const DeviceCapability& device) {
  return "no code in this build for " + device.arch + " (CUDA architectures " + std::string(architectures) + ")";
}

}  // namespace mla::cuda_flash
