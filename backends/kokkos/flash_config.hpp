// Tile shape of the KOKKOS flash-attention kernel, readable on host and device.
#pragma once

namespace mla::kokkos {

struct FlashTile {
  int rows_q;      // query rows per work item (Br)
  int cols_kv;     // keys per tile (Bc)
  int block_rows;  // rows of one micro-GEMM register block
  int block_cols;  // columns of one micro-GEMM register block (floats)
};

// One table for every execution space: the host numbers were tuned on an
// AVX-512 core (bench/) and are a reasonable shape for AVX2 as well; a GPU
// build of Kokkos would want its own row here (smaller scratch per team).
//
// Why these: 64 query rows amortise each staged K/V tile over 64 rows, and a
// 64-key tile keeps K^T (dqk x 64 fp32, 48 KiB at dqk 192) in L2 while the
// 16-column slice the micro-GEMM streams (12 KiB) stays in L1. A 4 x 32
// register block is 8 zmm accumulators (AVX-512) or 16 ymm (AVX2).
inline constexpr FlashTile host_flash_tile{64, 64, 4, 32};

static_assert(host_flash_tile.rows_q % host_flash_tile.block_rows == 0,
              "query rows must be a multiple of the register block rows");
static_assert(host_flash_tile.cols_kv % host_flash_tile.block_cols == 0,
              "key tile must be a multiple of the register block columns");
static_assert(host_flash_tile.block_rows * host_flash_tile.block_cols <= 256,
              "register block larger than any vector register file");

}  // namespace mla::kokkos
