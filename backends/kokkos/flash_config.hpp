// Tile shape of the KOKKOS flash-attention kernel, readable on host and device.
#pragma once

#include "host_isa.hpp"

namespace mla::kokkos {

struct FlashTile {
  int rows_q;      // query rows per work item (Br)
  int cols_kv;     // keys per tile (Bc)
  int block_rows;  // rows of one micro-GEMM register block
  int block_cols;  // columns of one micro-GEMM register block (floats)
};

// One row per kernel variant (host_isa.hpp). The register block was chosen
// by timing the micro-GEMM alone (thread CPU time, g++ 12 -O3, S^T-shaped
// operands, on an AVX-512 core):
//   AVX-512:          6x32 196 GFLOP/s (90% of peak); 6x16 45, 4x16 30
//   AVX2 + FMA:       6x32  76;                        6x16 52, 4x16 36
//   baseline (SSE2):  4x8   38 (mulps + addps; depth loop kept
//                     scalar, see micro_gemm);         2x16 39, 6x16 36
// The avx512 variant runs 8x32 blocks written with intrinsics
// (avx512_block.hpp): 16 accumulators in registers, and 8 divides the key
// tile, so no key row is padded (6 rows padded 64 keys to 66, 3% more
// work); the whole kernel ran 5% faster than with the compiled 8x32 block.
// Key tiles of 64 keep K (64 x dqk fp32, 48 KiB at dqk 192) in L2 and the
// 32-wide slice of Q^T that one pass of the micro-GEMM streams in L1. Each
// staged K/V tile is reused by every query of the tile, and staging K and V
// (rows a head stride apart, from L3) is the kernel's largest cost outside
// the products, so the avx512 variant takes 192 queries: 4-5% faster than
// 96 at 4k tokens, while 256 was slower at every length (scratch 470 KiB of
// the 1 MiB L2). Blocks of a causal tile that no query sees are skipped, so
// the longer tile adds little masked work. The other rows take the
// smallest multiple of both block sizes that is >= 64. A GPU build of
// Kokkos would want its own row (smaller scratch per team).
constexpr FlashTile flash_tile_for(HostIsa isa) {
  if (isa == HostIsa::baseline) return FlashTile{64, 64, 4, 8};
  return isa == HostIsa::avx2 ? FlashTile{96, 64, 6, 32} : FlashTile{192, 64, 8, 32};
}

// Without run-time dispatch the single variant is compiled for the build's
// target, and its row follows that target.
#if defined(__AVX__)
inline constexpr HostIsa compiled_host_isa = HostIsa::avx2;
#else
inline constexpr HostIsa compiled_host_isa = HostIsa::baseline;
#endif

constexpr bool valid_tile(FlashTile tile) {
  return tile.rows_q % tile.block_rows == 0            // query rows in whole register-block rows
         && tile.rows_q % tile.block_cols == 0         // S^T has queries as columns
         && tile.block_rows * tile.block_cols <= 256;  // fits some vector register file
}
static_assert(valid_tile(flash_tile_for(HostIsa::baseline)) && valid_tile(flash_tile_for(HostIsa::avx2)) &&
              valid_tile(flash_tile_for(HostIsa::avx512)));

}  // namespace mla::kokkos
