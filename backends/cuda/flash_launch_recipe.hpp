// The launch recipe of a CUDA_FLASH instantiation: its name, grid, threads
// and shared memory, and the heads per L2 group of its block order
// (gpu::head_tile), sized from the device's L2 by the rule HOPPER_FLASH uses
// (hopper_config.hpp): half of the L2 for the K and V of a group's heads at
// the launch's key count. Plain C++, shared by the CUDA launcher
// (flash_launch.cuh, flash_dispatch.cu) and the emulated one
// (tests/support/simt), which differ only in how they start the blocks.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/flash_config.hpp"
#include "cuda/hopper_config.hpp"
#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

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

// What one launch of an instantiation needs but the device's stream: one
// block per (work item, head, key split).
struct FlashLaunch {
  std::string kernel;  // "flash_forward<bfloat16, 192, 128, causal>"
  std::int64_t blocks = 0;
  int threads = 0;
  std::size_t shared_bytes = 0;

  // For the launch error: work items, heads, splits, shared memory.
  std::string describe(const gpu::FlashParams& params) const {
    return std::to_string(params.num_work) + " work items x " + std::to_string(params.num_heads) + " heads x " +
           std::to_string(params.num_splits) + " key splits, " + std::to_string(shared_bytes) +
           " bytes of shared memory";
  }
};

// The recipe of the <dtype, HeadDimQk, HeadDimV, Causal> instantiation for
// `params` (`input` the dtype of q, k and v: dtype, or float8_e4m3);
// blocks == 0: nothing to launch. Raises Error(invalid_argument) naming the
// kernel when the grid exceeds its limit.
template <int HeadDimQk, int HeadDimV, bool Causal>
FlashLaunch plan_flash_launch(const gpu::FlashParams& params, DType dtype, DType input) {
  constexpr FlashTileConfig cfg = FlashTile<HeadDimQk, HeadDimV>::value;
  FlashLaunch launch;
  std::string types(dtype_name(dtype));
  if (input != dtype) types = std::string(dtype_name(input)) + " -> " + types;
  launch.kernel = "flash_forward<" + types + ", " + std::to_string(HeadDimQk) + ", " + std::to_string(HeadDimV) +
                  (Causal ? ", causal>" : ", non-causal>");
  launch.blocks = static_cast<std::int64_t>(params.num_work) * params.num_heads * params.num_splits;
  if (launch.blocks > INT_MAX) {
    raise(ErrorCategory::invalid_argument, launch.kernel + ": " + std::to_string(launch.blocks) +
                                               " thread blocks exceed the grid limit; split the batch");
  }
  launch.threads = cfg.threads();
  launch.shared_bytes = cfg.shared_bytes();
  return launch;
}

}  // namespace mla::cuda_flash
