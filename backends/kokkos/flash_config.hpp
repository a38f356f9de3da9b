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
// compile-time choice, like any tile table; no intrinsics involved): the
// register block must fit the vector register file or g++ spills the
// accumulators. Measured with the micro-GEMM alone on an AVX-512 core:
//   AVX-512 (32 zmm): 6 x 32 = 12 accumulators + 2 for B; best of 4x32, 8x32, 6x32, 12x16
//   AVX/AVX2 (16 ymm): 6 x 16 = 12 accumulators
//   otherwise (SSE2: 16 xmm, no FMA; NEON): 4 x 16 = 16 accumulators of 4 lanes
// Key tiles of 64 keep K (64 x dqk fp32, 48 KiB at dqk 192) in L2 and the
// kNc-wide slice of Q^T that one pass of the micro-GEMM streams in L1; the
// query tile is the smallest multiple of both block sizes that is >= 64, so
// each staged K/V tile is reused by many query rows. A GPU build of Kokkos
// would want its own row (smaller scratch per team).
#if defined(__AVX512F__)
inline constexpr FlashTile host_flash_tile{96, 64, 6, 32};
#elif defined(__AVX__)
inline constexpr FlashTile host_flash_tile{96, 64, 6, 16};
#else
inline constexpr FlashTile host_flash_tile{64, 64, 4, 16};
#endif

static_assert(host_flash_tile.rows_q % host_flash_tile.block_rows == 0,
              "query rows must be a multiple of the register block rows");
static_assert(host_flash_tile.rows_q % host_flash_tile.block_cols == 0,
              "query rows must be a multiple of the register block columns (S^T has queries as columns)");
static_assert(host_flash_tile.block_rows * host_flash_tile.block_cols <= 256,
              "register block larger than any vector register file");

}  // namespace mla::kokkos
