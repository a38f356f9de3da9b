#include "host_isa.hpp"

#include <cstdlib>

#include "mla/error.hpp"

namespace mla::kokkos {

namespace {

constexpr HostIsa kAll[] = {HostIsa::baseline, HostIsa::avx2, HostIsa::avx512};

// The variants' names, comma-separated; only those this CPU runs if asked.
std::string variant_list(bool only_supported) {
  std::string names;
  for (HostIsa isa : kAll) {
    if (only_supported && !host_isa_supported(isa)) continue;
    if (!names.empty()) names += ", ";
    names += host_isa_name(isa);
  }
  return names;
}

}  // namespace

const char* requested_host_isa() {
  const char* requested = std::getenv("MLA_KOKKOS_ISA");
  return requested != nullptr && *requested != '\0' ? requested : nullptr;
}

std::string_view host_isa_name(HostIsa isa) {
  switch (isa) {
    case HostIsa::baseline:
      return "baseline";
    case HostIsa::avx2:
      return "avx2";
    case HostIsa::avx512:
      return "avx512";
  }
  return "unknown";
}

bool host_isa_supported(HostIsa isa) {
  if (isa == HostIsa::baseline) return true;
#if MLA_KOKKOS_ISA_DISPATCH
  // libgcc's and compiler-rt's CPU model also check that the OS saves the
  // AVX / AVX-512 register state (XCR0), not only CPUID.
  __builtin_cpu_init();
  if (isa == HostIsa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

HostIsa selected_host_isa() {
  if (const char* requested = requested_host_isa()) {
    for (HostIsa isa : kAll) {
      if (host_isa_name(isa) != requested) continue;
      if (!host_isa_supported(isa)) {
        raise(ErrorCategory::config, std::string("MLA_KOKKOS_ISA=") + requested +
                                         ": this CPU or build cannot run it; supported here: " + variant_list(true));
      }
      return isa;
    }
    raise(ErrorCategory::config, std::string("MLA_KOKKOS_ISA=") + requested +
                                     " is not a KOKKOS kernel variant; valid: " + variant_list(false) +
                                     " (supported here: " + variant_list(true) + ")");
  }
  for (HostIsa isa : {HostIsa::avx512, HostIsa::avx2}) {
    if (host_isa_supported(isa)) return isa;
  }
  return HostIsa::baseline;
}

}  // namespace mla::kokkos
