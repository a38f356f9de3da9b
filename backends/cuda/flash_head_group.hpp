// CUDA_FLASH's heads per L2 group (the block order of gpu::head_tile), sized
// from the device's L2 by the rule HOPPER_FLASH uses (hopper_config.hpp):
// half of the L2 for the K and V of a group's heads at the launch's key
// count. Plain C++, shared by the CUDA launcher and the emulated one.
#pragma once

#include <cstddef>

#include "cuda/hopper_config.hpp"
#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/flash_params.hpp"

namespace mla::cuda_flash {

// MLA_CUDA_HEAD_GROUP=n caps CUDA_FLASH's heads per group at n instead of
// sizing the groups from the L2 (n at least the head count: the plain order,
// every head of a work item before the next); a tuning knob for benchmarks.
// Unset or empty: 0. Raises Error(invalid_argument) for anything else.
inline int head_group_override() { return gpu::whole_number_setting("MLA_CUDA_HEAD_GROUP", 1024); }

// A divisor of params.num_heads; `l2_bytes` 0 (unknown) caps groups at
// HOPPER_FLASH's default.
inline int flash_head_group(const gpu::FlashParams& params, std::size_t l2_bytes, int head_dim_qk, int head_dim_v) {
  const int cap = head_group_override();
  return hopper_flash::head_group(
      params.num_heads,
      cap > 0 ? cap : hopper_flash::l2_max_head_group(l2_bytes, params.k_tokens, head_dim_qk, head_dim_v));
}

}  // namespace mla::cuda_flash
