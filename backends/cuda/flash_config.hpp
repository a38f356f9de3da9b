// Tile shapes of the CUDA_FLASH kernel, one row per (qk head dim, v head dim)
// instantiation, chosen at compile time for each shape of
// cuda_hip/flash_shapes.def. A plain constexpr table: the kernel, the
// launcher, the host tests and ci/cuda-inspect read the same numbers, and
// every row is checked (shared memory budget, load divisibility, registers).
#pragma once

#include <cstddef>

#include "cuda_hip/tile_table.hpp"
#include "mla/detail/host_device.hpp"

namespace mla::cuda_flash {

// mma.sync.aligned.m16n8k16: a warp owns 16 query rows.
inline constexpr int rows_per_warp = 16;
inline constexpr int warp_threads = 32;
// q, k, v and out are fp16 or bf16.
inline constexpr std::size_t element_bytes = 2;
// cp.async and ldmatrix move 16-byte chunks (8 elements).
inline constexpr int chunk_elements = 8;
// The opt-in shared memory of sm_86 / sm_89 (99 KiB), the smallest of the sm_80+
// parts the capability predicate accepts: every row must fit it.
inline constexpr std::size_t portable_shared_bytes = 99 * 1024;
// Fragment registers a thread may hold (Q, S, O); ptxas needs the rest of the
// 255 for addresses and softmax state. ci/cuda-inspect checks the real count.
inline constexpr int fragment_register_budget = 168;

struct FlashTileConfig {
  int head_dim_qk;
  int head_dim_v;
  int block_rows;  // query rows per thread block (Br)
  int block_cols;  // keys per iteration (Bc)
  int warps;
  bool q_in_registers;  // Q lives as mma A fragments for the whole block

  MLA_HOST_DEVICE constexpr int threads() const { return warps * warp_threads; }
  MLA_HOST_DEVICE constexpr std::size_t q_tile_bytes() const {
    return static_cast<std::size_t>(block_rows) * head_dim_qk * element_bytes;
  }
  MLA_HOST_DEVICE constexpr std::size_t k_tile_bytes() const {
    return static_cast<std::size_t>(block_cols) * head_dim_qk * element_bytes;
  }
  MLA_HOST_DEVICE constexpr std::size_t v_tile_bytes() const {
    return static_cast<std::size_t>(block_cols) * head_dim_v * element_bytes;
  }
  // One pipeline stage: a K tile then a V tile. Two stages: the next tile
  // streams in while the current one is used.
  MLA_HOST_DEVICE constexpr std::size_t stage_bytes() const { return k_tile_bytes() + v_tile_bytes(); }
  // Layout: [stage 0][stage 1][Q]. When Q moves to registers before stage 1 is
  // first filled, Q borrows stage 1's space (and whatever follows it).
  MLA_HOST_DEVICE constexpr std::size_t q_offset() const { return q_in_registers ? stage_bytes() : 2 * stage_bytes(); }
  MLA_HOST_DEVICE constexpr std::size_t shared_bytes() const {
    const std::size_t tail = q_in_registers ? (q_tile_bytes() > stage_bytes() ? q_tile_bytes() : stage_bytes())
                                            : stage_bytes() + q_tile_bytes();
    return stage_bytes() + tail;
  }
  // Registers per thread for the O accumulator, the S tile and Q fragments.
  MLA_HOST_DEVICE constexpr int fragment_registers() const {
    const int o = head_dim_v / 8 * 4;
    const int s = block_cols / 8 * 4;
    const int q = q_in_registers ? head_dim_qk / 16 * 4 : 4;
    return o + s + q;
  }
};

// The loader cuts a row of `chunks` 16-byte chunks into segments: the widest
// power of two (at most `threads`) that divides the thread count and fits.
MLA_HOST_DEVICE constexpr int segment_width(int chunks, int threads) {
  int width = 1;
  while (width * 2 <= chunks && width * 2 <= threads && threads % (width * 2) == 0) width *= 2;
  return width;
}

// cp.async of a [rows, dim] tile: in every segment the threads cover whole
// rows per pass, so every thread moves the same number of chunks.
MLA_HOST_DEVICE constexpr bool loads_evenly(int rows, int dim, int threads) {
  for (int begin = 0, chunks = dim / chunk_elements; begin < chunks;) {
    const int width = segment_width(chunks - begin, threads);
    if (rows % (threads / width) != 0) return false;
    begin += width;
  }
  return true;
}

MLA_HOST_DEVICE constexpr bool is_valid(const FlashTileConfig& c) {
  if (c.warps <= 0 || c.block_cols <= 0) return false;
  // One 16-row mma tile per warp.
  const bool warp_rows = c.block_rows == c.warps * rows_per_warp;
  // P feeds the P V mma in k-steps of 16 keys.
  const bool key_steps = c.block_cols % 16 == 0;
  // Rows of whole groups of 8 chunks: the XOR swizzle permutes within a group.
  const bool swizzle = c.head_dim_qk % 64 == 0 && c.head_dim_v % 64 == 0;
  const bool loads = loads_evenly(c.block_rows, c.head_dim_qk, c.threads()) &&
                     loads_evenly(c.block_cols, c.head_dim_qk, c.threads()) &&
                     loads_evenly(c.block_cols, c.head_dim_v, c.threads());
  const bool fits = c.shared_bytes() <= portable_shared_bytes && c.fragment_registers() <= fragment_register_budget;
  return warp_rows && key_steps && swizzle && loads && fits;
}

// The tile of a (qk head dim, v head dim) pair: the first candidate that
// passes is_valid, largest first. 128-row blocks of 8 warps with Q held in
// registers need no Q reload per key tile (192/128 and 128/128 fit); past the
// register budget Q moves to shared memory, and past the shared memory budget
// the block halves. 256/256 ends at 64 rows x 32 keys with Q in shared memory:
// Q in registers would need 64 registers on top of 128 for O.
inline constexpr FlashTileConfig tile_candidates[] = {
    {0, 0, 128, 64, 8, true}, {0, 0, 128, 64, 8, false}, {0, 0, 64, 64, 4, true},
    {0, 0, 64, 64, 4, false}, {0, 0, 64, 32, 4, true},   {0, 0, 64, 32, 4, false},
};

// The instantiations: one row per shape of cuda_hip/flash_shapes.def (a pair
// listed twice gets two equal rows; lookups take the first).
inline constexpr FlashTileConfig flash_tile_configs[] = {
#define MLA_FLASH_SHAPE(nope, rope, v) gpu::first_fitting_tile(tile_candidates, (nope) + (rope), (v)),
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
};

static_assert(gpu::every_tile_is_valid(flash_tile_configs),
              "a shape of cuda_hip/flash_shapes.def has no CUDA_FLASH tile that fits");

// The row for (dqk, dv), or null when no kernel was built for it. Host only:
// the table is a host variable; device code reads FlashTile<...>::value.
constexpr const FlashTileConfig* find_flash_tile_config(int head_dim_qk, int head_dim_v) {
  return gpu::find_tile(flash_tile_configs, head_dim_qk, head_dim_v);
}

// The row of an instantiation, as a compile-time constant for the kernel.
template <int HeadDimQk, int HeadDimV>
struct FlashTile {
  static_assert(find_flash_tile_config(HeadDimQk, HeadDimV) != nullptr, "no tile configuration for these head dims");
  static constexpr FlashTileConfig value = *find_flash_tile_config(HeadDimQk, HeadDimV);
};

}  // namespace mla::cuda_flash
