// CUDA_FLASH's heads per L2 group (the block order of gpu::head_tile), sized
// from the device's L2 by the rule HOPPER_FLASH uses (hopper_config.hpp):
// half of the L2 for the K and V of a group's heads at the launch's key
// count. Plain C++, shared by the CUDA launcher and the emulated one.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>

#include "cuda/hopper_config.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash {

// MLA_CUDA_HEAD_GROUP=n caps CUDA_FLASH's heads per group at n instead of
// sizing the groups from the L2 (n at least the head count: the plain order,
// every head of a work item before the next); a tuning knob for benchmarks.
// Unset or empty: 0. Raises Error(invalid_argument) for anything else.
inline int head_group_override() {
  const char* value = std::getenv("MLA_CUDA_HEAD_GROUP");
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < 1 || n > 1024) {
    raise(ErrorCategory::invalid_argument,
          std::string("MLA_CUDA_HEAD_GROUP must be a whole number from 1 to 1024; got '") + value + "'");
  }
  return static_cast<int>(n);
}

// A divisor of params.num_heads; `l2_bytes` 0 (unknown) caps groups at
// HOPPER_FLASH's default.
inline int flash_head_group(const gpu::FlashParams& params, std::size_t l2_bytes, int head_dim_qk, int head_dim_v) {
  const int cap = head_group_override();
  return hopper_flash::head_group(
      params.num_heads,
      cap > 0 ? cap : hopper_flash::l2_max_head_group(l2_bytes, params.k_tokens, head_dim_qk, head_dim_v));
}

}  // namespace mla::cuda_flash
