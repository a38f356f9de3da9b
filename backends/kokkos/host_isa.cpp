#include "host_isa.hpp"

#include <cstdlib>
#include <iterator>

#include "mla/error.hpp"

namespace mla::kokkos {

namespace {

// The names MLA_KOKKOS_ISA accepts: the three variants, and the avx512
// variant with its bf16 dot-product path.
struct NamedVariant {
  std::string_view name;
  HostIsa isa;
  bool bf16_dot;
};
constexpr NamedVariant kNamed[] = {{"baseline", HostIsa::baseline, false},
                                   {"avx2", HostIsa::avx2, false},
                                   {"avx512", HostIsa::avx512, false},
                                   {"avx512_bf16", HostIsa::avx512, true}};

bool supported(const NamedVariant& variant) {
  return variant.bf16_dot ? host_bf16_dot_supported() : host_isa_supported(variant.isa);
}

// The names, comma-separated; only those this CPU runs if asked.
std::string variant_list(bool only_supported) {
  std::string names;
  for (const NamedVariant& variant : kNamed) {
    if (only_supported && !supported(variant)) continue;
    if (!names.empty()) names += ", ";
    names += variant.name;
  }
  return names;
}

// The variant MLA_KOKKOS_ISA names (checked), or the widest supported one.
NamedVariant selected_variant() {
  if (const char* requested = requested_host_isa()) {
    for (const NamedVariant& variant : kNamed) {
      if (variant.name != requested) continue;
      if (!supported(variant)) {
        raise(ErrorCategory::config, std::string("MLA_KOKKOS_ISA=") + requested +
                                         ": this CPU or build cannot run it; supported here: " + variant_list(true));
      }
      return variant;
    }
    raise(ErrorCategory::config, std::string("MLA_KOKKOS_ISA=") + requested +
                                     " is not a KOKKOS kernel variant; valid: " + variant_list(false) +
                                     " (supported here: " + variant_list(true) + ")");
  }
  for (auto it = std::rbegin(kNamed); it != std::rend(kNamed); ++it) {
    if (supported(*it)) return *it;
  }
  return kNamed[0];
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

bool host_bf16_dot_supported() {
#if MLA_KOKKOS_ISA_DISPATCH
  return host_isa_supported(HostIsa::avx512) && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

HostIsa selected_host_isa() { return selected_variant().isa; }

bool selected_bf16_dot() { return selected_variant().bf16_dot; }

}  // namespace mla::kokkos
