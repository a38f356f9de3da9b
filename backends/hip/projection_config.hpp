// The tile of HIP_FLASH's MFMA up-projection (projection_kernel.hpp): a
// constexpr value read by the kernel, its launch and the host tests.
#pragma once

#include "mfma_layout.hpp"
#include "mla/detail/host_device.hpp"

namespace mla::hip_flash::projection {

struct ProjectionTileConfig {
  int waves;         // per workgroup, side by side along the output columns
  int column_tiles;  // 32-column MFMA tiles per wave

  MLA_HOST_DEVICE constexpr int threads() const { return waves * mfma::wave_size; }
  // A workgroup's tokens: the N side of one 32x32 product, shared by its waves.
  MLA_HOST_DEVICE constexpr int block_tokens() const { return mfma::tile; }
  MLA_HOST_DEVICE constexpr int wave_columns() const { return column_tiles * mfma::tile; }
  MLA_HOST_DEVICE constexpr int block_columns() const { return waves * wave_columns(); }
  // Accumulators and the operands of one k-step, per lane.
  MLA_HOST_DEVICE constexpr int fragment_registers() const {
    return column_tiles * mfma::accumulators + (column_tiles + 1) * 2;
  }
};

// Four 32x32 tiles per wave: each token operand (4 latents converted per
// lane) feeds four products, and 64 accumulators leave the register file to
// more waves per SIMD to hide the global loads. Four waves make a workgroup
// of 256 lanes covering 512 output columns, two heads of DeepSeek's 128 + 128.
// Unmeasured on AMD hardware.
inline constexpr ProjectionTileConfig projection_tile{4, 4};

static_assert(projection_tile.waves > 0 && projection_tile.column_tiles > 0);
static_assert(projection_tile.threads() <= 1024, "a workgroup holds at most 1024 lanes");
static_assert(projection_tile.fragment_registers() <= 128, "at most a quarter of the 512 registers of a lane");

}  // namespace mla::hip_flash::projection
