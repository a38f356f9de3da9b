// Where each lane's data sits for ldmatrix and mma.sync.m16n8k16, and the
// XOR swizzle of the shared-memory tiles. Pure index functions, used by the
// kernel and checked on the host by tests/cuda/fragment_layout_test.cpp, which
// emulates ldmatrix and mma from the PTX ISA's fragment tables.
//
// PTX facts used (g = lane / 4, t = lane % 4):
//   A (16x16, row-major), 4 regs of 2 halves: a0 (g, 2t..2t+1), a1 (g+8, 2t..),
//     a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B (16x8, "col": k runs along a register), 2 regs: b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g)
//   C/D (16x8 fp32): c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
//   ldmatrix.x4: lane l gives the address of row l%8 of matrix l/8 and receives
//     from each matrix m register m = (row g, cols 2t..2t+1); with .trans it
//     receives (rows 2t..2t+1, col g) instead.
#pragma once

#include <cstdint>

#include "mla/detail/host_device.hpp"

namespace mla::cuda_flash::layout {

// 16-byte chunk `chunk` of row `row` in a tile of 2-byte elements with
// `row_chunks` chunks per row (a multiple of 8). XOR with the row's low 3
// bits: the 8 rows one ldmatrix phase reads land in 8 different bank groups.
MLA_HOST_DEVICE constexpr std::uint32_t tile_offset(int row, int chunk, int row_chunks) {
  const int swizzled = (chunk & ~7) | ((chunk ^ row) & 7);
  return static_cast<std::uint32_t>((row * row_chunks + swizzled) * 16);
}

// Chunks per shared-memory row for a row of `chunks`: whole groups of 8, so
// the swizzle stays inside the row (192 e4m3 dims are 12 chunks, kept in 16).
MLA_HOST_DEVICE constexpr int pitch_chunks(int chunks) { return (chunks + 7) / 8 * 8; }

// Every ldmatrix row address in the kernel has row % 8 == lane % 8, so the
// swizzled chunk of logical chunk 8 * group + i is 8 * group + (i ^ lane % 8):
// the group part is a compile-time offset and a lane needs only 4 values for
// even i + c (c the lane's 0/1 chunk parity), precomputed once.
// swizzled_offset(...) == tile_offset(row, 2 * step + c, ...) - row * row bytes.
MLA_HOST_DEVICE constexpr std::uint32_t step_group_offset(int step) {
  return static_cast<std::uint32_t>((step / 4) * 128);
}
MLA_HOST_DEVICE constexpr std::uint32_t lane_step_offset(int lane, int chunk_parity, int step_in_group) {
  return static_cast<std::uint32_t>(((2 * step_in_group + chunk_parity) ^ (lane % 8)) * 16);
}

// A operand from a row-major [rows, k] tile, rows r0..r0+15, k-step ks:
// matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
MLA_HOST_DEVICE constexpr int a_row(int lane) { return lane % 16; }
MLA_HOST_DEVICE constexpr int a_parity(int lane) { return lane / 16; }
MLA_HOST_DEVICE constexpr int a_chunk(int lane, int k_step) { return 2 * k_step + a_parity(lane); }

// B operand of S = Q K^T from a row-major [keys, k] K tile; one x4 load covers
// 16 keys (two n-tiles): matrices (keys 0-7, k 0-7) = b0 and (keys 0-7, k 8-15)
// = b1 of n-tile 0, then the same for keys 8-15 (n-tile 1).
MLA_HOST_DEVICE constexpr int k_key(int lane) { return (lane / 16) * 8 + lane % 8; }
MLA_HOST_DEVICE constexpr int k_parity(int lane) { return (lane / 8) % 2; }
MLA_HOST_DEVICE constexpr int k_chunk(int lane, int k_step) { return 2 * k_step + k_parity(lane); }

// B operand of O += P V from a row-major [keys, dv] V tile with ldmatrix.trans;
// one x4 load covers 16 keys and 16 output columns: matrices (keys 0-7, n 0-7)
// = b0 and (keys 8-15, n 0-7) = b1 of n-tile 0, then columns 8-15 (n-tile 1).
MLA_HOST_DEVICE constexpr int v_key(int lane) { return ((lane / 8) % 2) * 8 + lane % 8; }
MLA_HOST_DEVICE constexpr int v_parity(int lane) { return lane / 16; }
MLA_HOST_DEVICE constexpr int v_chunk(int lane, int n_pair) { return 2 * n_pair + v_parity(lane); }

// Row and column (within a 16x8 tile) of accumulator element c[e].
MLA_HOST_DEVICE constexpr int acc_row(int lane, int e) { return lane / 4 + (e / 2) * 8; }
MLA_HOST_DEVICE constexpr int acc_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }

// The A operand of P V for key step ks, built from the S accumulators of
// n-tiles 2ks and 2ks+1: S's C layout equals A's layout two n-tiles at a time,
// so P never leaves registers. `pack(lo, hi)` puts `lo` in the low half.
template <int Tiles, class Pack>
MLA_HOST_DEVICE constexpr void p_fragment(std::uint32_t (&a)[4], const float (&s)[Tiles][4], int k_step, Pack pack) {
  a[0] = pack(s[2 * k_step][0], s[2 * k_step][1]);
  a[1] = pack(s[2 * k_step][2], s[2 * k_step][3]);
  a[2] = pack(s[2 * k_step + 1][0], s[2 * k_step + 1][1]);
  a[3] = pack(s[2 * k_step + 1][2], s[2 * k_step + 1][3]);
}

// e4m3 (mma.sync m16n8k32): a thread's S accumulators of n-tiles 4ks..4ks+3
// hold keys 8j + 2t and 8j + 2t + 1 of the key step; the A operand wants four
// consecutive k per register. Rather than move bytes between lanes, the key
// step's keys are permuted: A position 4t + i (and 16 + 4t + i) holds key
// 2t, 2t + 1, 2t + 8, 2t + 9 (plus 16) for i = 0..3, which V's B fragment
// repeats (v_e4m3_fragment). `pack(a, b, c, d)` puts `a` in the lowest byte.
template <int Tiles, class Pack>
MLA_HOST_DEVICE constexpr void p_fragment_e4m3(std::uint32_t (&a)[4], const float (&s)[Tiles][4], int k_step,
                                               Pack pack) {
  const int j = 4 * k_step;
  a[0] = pack(s[j][0], s[j][1], s[j + 1][0], s[j + 1][1]);
  a[1] = pack(s[j][2], s[j][3], s[j + 1][2], s[j + 1][3]);
  a[2] = pack(s[j + 2][0], s[j + 2][1], s[j + 3][0], s[j + 3][1]);
  a[3] = pack(s[j + 2][2], s[j + 2][3], s[j + 3][2], s[j + 3][3]);
}

// V's B operands for one e4m3 key step and one 16-byte column chunk, from
// ldmatrix.x4.trans of the step's 32 keys (matrix m: keys 8m..8m+7, lane l
// giving key l's row): register m holds, for the lane's t and g, keys
// 8m + 2t and 8m + 2t + 1 at dims 2g and 2g + 1 of the chunk (bytes: key 2t
// dim 2g, key 2t dim 2g + 1, key 2t + 1 dim 2g, key 2t + 1 dim 2g + 1).
// Two byte permutes give the permuted keys of p_fragment_e4m3 for dim 2g
// (even) and dim 2g + 1 (odd): the even mma's output column c is dim 2c of
// the chunk and the odd one's 2c + 1.
inline constexpr std::uint32_t v_even_bytes = 0x6420;
inline constexpr std::uint32_t v_odd_bytes = 0x7531;

// Dim (within its 16-dim chunk) of accumulator element e of the even (odd = 0)
// or odd (odd = 1) mma of an e4m3 chunk.
MLA_HOST_DEVICE constexpr int e4m3_acc_dim(int lane, int e, int odd) { return 2 * acc_col(lane, e) + odd; }

}  // namespace mla::cuda_flash::layout
