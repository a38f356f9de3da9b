// Tile shape of the KOKKOS flash-attention kernel, readable on host and device.
#pragma once

namespace mla::kokkos {

struct FlashTile {
  int rows_q;      // query rows per work item (Br)
  int cols_kv;     // keys per tile (Bc)
  int block_rows;  // rows of one micro-GEMM register block
  int block_cols;  // columns of one micro-GEMM register block (floats)
};

// The host row depends on the vector ISA the kernel is compiled for (a
// compile-time choice, like any tile table; no intrinsics involved). The
// register block was chosen by timing the micro-GEMM alone (thread CPU time,
// g++ 12 -O3, S^T-shaped operands, on an AVX-512 core):
//   -march=native (AVX-512):  6x32 196 GFLOP/s (90% of peak); 6x16 45, 4x16 30
//   -mavx2 -mfma:             6x32  76;                        6x16 52, 4x16 36
//   baseline x86-64 (SSE2):   4x8   38 (mulps + addps; depth loop kept
//                             scalar, see micro_gemm);         2x16 39, 6x16 36
// Key tiles of 64 keep K (64 x dqk fp32, 48 KiB at dqk 192) in L2 and the
// 32-wide slice of Q^T that one pass of the micro-GEMM streams in L1; the
// query tile is the smallest multiple of both block sizes that is >= 64, so
// each staged K/V tile is reused by many query rows. A GPU build of Kokkos
// would want its own row (smaller scratch per team).
#if defined(__AVX__)
inline constexpr FlashTile host_flash_tile{96, 64, 6, 32};
#else
inline constexpr FlashTile host_flash_tile{64, 64, 4, 8};
#endif

static_assert(host_flash_tile.rows_q % host_flash_tile.block_rows == 0,
              "query rows must be a multiple of the register block rows");
static_assert(host_flash_tile.rows_q % host_flash_tile.block_cols == 0,
              "query rows must be a multiple of the register block columns (S^T has queries as columns)");
static_assert(host_flash_tile.block_rows * host_flash_tile.block_cols <= 256,
              "register block larger than any vector register file");

}  // namespace mla::kokkos
