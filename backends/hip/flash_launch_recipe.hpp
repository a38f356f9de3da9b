// The launch recipe of a HIP_FLASH instantiation: its name and grid, one
// block per (work item, head, key split). Plain C++, shared by the HIP
// launcher (flash_kernel_launch.hpp) and the emulated one (tests/support/simt),
// which differ only in how they start the blocks.
#pragma once

#include <string>

#include "cuda_hip/flash_params.hpp"
#include "hip/flash_config.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash {

struct FlashLaunch {
  std::string kernel;  // "hip_flash_forward<bfloat16, 192, 128, cdna3>"
  unsigned grid[3] = {0, 0, 0};
  int threads = 0;
  bool empty() const { return grid[0] == 0 || grid[1] == 0; }

  // For the launch error: work items and heads.
  std::string describe(const gpu::FlashParams& params) const {
    return std::to_string(params.num_work) + " work items, " + std::to_string(params.num_heads) + " heads";
  }
};

// E4m3: float8_e4m3 inputs, D the output dtype.
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family, bool E4m3 = false>
FlashLaunch plan_flash_launch(const gpu::FlashParams& params) {
  constexpr FlashTileConfig c = flash_tile_config<HeadDimQk, HeadDimV, Family>();
  FlashLaunch launch;
  launch.kernel = "hip_flash_forward<" + std::string(E4m3 ? "float8_e4m3 -> " : "") + std::string(dtype_name(D)) +
                  ", " + std::to_string(HeadDimQk) + ", " + std::to_string(HeadDimV) + ", " + tile_family_name(Family) +
                  ">";
  launch.grid[0] = static_cast<unsigned>(params.num_work);
  launch.grid[1] = static_cast<unsigned>(params.num_heads);
  launch.grid[2] = static_cast<unsigned>(params.num_splits);
  launch.threads = c.threads();
  return launch;
}

}  // namespace mla::hip_flash
