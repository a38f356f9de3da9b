// The KOKKOS kernel's bf16 path on AVX512-BF16 (flash_bf16.cpp).
#pragma once

#include "flash_attention.hpp"

namespace mla::kokkos {

// flash_attention for bf16 inputs with both products as AVX512-BF16 dot
// products; the caller has checked host_bf16_dot_supported(). Raises
// Error(not_supported) in a build without the run-time dispatch.
void flash_attention_bf16_dot(const AttentionProblem& problem);

}  // namespace mla::kokkos
