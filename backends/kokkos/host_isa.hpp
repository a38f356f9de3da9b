// Which vector instruction set the KOKKOS kernel's hot loops run with.
//
// A library built for the baseline ISA (SSE2 on x86-64) runs on any machine it
// is copied to, but leaves most of a modern core idle: the register-blocked
// micro-GEMM reaches 38 GFLOP/s with SSE2, 76 with AVX2+FMA and 196 with
// AVX-512 on the same core (flash_config.hpp). So on x86-64 with g++ or clang
// the hot loops are compiled three times, each with a function-level target
// attribute, and the kernel picks the widest the CPU (and OS) supports at run
// time. Everything else in the kernel stays baseline code, so no instruction
// the CPU lacks can run on any path. Elsewhere (other architectures,
// compilers, or a Kokkos built for a GPU) the kernel has one variant,
// compiled for whatever the build targets.
#pragma once

#include <Kokkos_Macros.hpp>  // KOKKOS_ENABLE_* of the Kokkos in use

#include <string>
#include <string_view>

namespace mla::kokkos {

enum class HostIsa { baseline, avx2, avx512 };

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP) && !defined(KOKKOS_ENABLE_SYCL)
#define MLA_KOKKOS_ISA_DISPATCH 1
#else
#define MLA_KOKKOS_ISA_DISPATCH 0
#endif

std::string_view host_isa_name(HostIsa isa);

// Whether this CPU and OS can run `isa` (always true for baseline; false for
// the others when the build has no dispatch).
bool host_isa_supported(HostIsa isa);

// MLA_KOKKOS_ISA when set and not empty, else nullptr.
const char* requested_host_isa();

// The variant the kernel runs: the widest supported one, or the one named by
// MLA_KOKKOS_ISA (baseline, avx2, avx512, avx512_bf16), which may only lower
// it; avx512_bf16 runs the avx512 variant (see selected_bf16_dot). An
// unknown name, or one this CPU cannot run, raises Error(config) naming the
// variable, the value and the choices. Read on every call so that tests can
// switch it.
HostIsa selected_host_isa();

// Whether this CPU and OS can run the avx512 variant's bf16 path, whose two
// attention products are AVX512-BF16 dot products (vdpbf16ps: bf16 pairs
// multiplied and summed into fp32 lanes at twice the FMA rate); false when
// the build has no dispatch.
bool host_bf16_dot_supported();

// Whether bf16 inputs take that path: by default when the CPU supports it,
// and when MLA_KOKKOS_ISA is avx512_bf16; never when it names another
// variant, so MLA_KOKKOS_ISA=avx512 runs bf16 through fp32 FMAs. Errors as
// selected_host_isa.
bool selected_bf16_dot();

}  // namespace mla::kokkos
