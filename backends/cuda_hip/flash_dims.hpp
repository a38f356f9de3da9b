// The MLA dims both GPU flash backends serve (HIP_FLASH promises the same
// shapes as CUDA_FLASH), and the compile-time check that each vendor has a tile
// configuration for every one of them.
#pragma once

#include "mla/dims.hpp"

namespace mla::gpu_flash {

// The model dims each compiled (qk head dim, v head dim) pair serves.
inline constexpr MlaDims flash_dims[] = {
    {128, 64, 128},  // DeepSeek-V2/V3/R1: 192 / 128
    {64, 64, 128},   // Mistral-Small-4: 128 / 128
    {192, 64, 256},  // GLM-5: 256 / 256
};

// True when `find_tile(qk_head_dim, v_head_dim)` is non-null for every entry
// of flash_dims; vendors static_assert it with their own tile lookup.
template <class FindTile>
constexpr bool every_flash_dims_has_a_tile(FindTile find_tile) {
  for (const MlaDims& dims : flash_dims) {
    if (find_tile(dims.qk_head_dim(), dims.v_head_dim) == nullptr) return false;
  }
  return true;
}

}  // namespace mla::gpu_flash
