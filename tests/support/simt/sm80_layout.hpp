// The register fragments of mma.sync.aligned.m16n8k32 with 8-bit operands
// (.e4m3 / .e5m2, sm_89 and newer), as pure functions written from the PTX
// ISA's fragment tables for that shape. The emulator's mma (warp_ops.cpp)
// places each lane's bytes by them; a test cross-checks them against
// CUTLASS/CuTe's SM89_16x8x32 atom. Host code only.
#pragma once

namespace mla::simt::sm80_layout {

struct Coord {
  int row;
  int col;
};

// A (16 x 32, row-major): value i of a lane is byte i % 4 of register i / 4.
// groupID = lane / 4 picks the row (plus 8 for values 4-7 and 12-15),
// threadID_in_group = lane % 4 four consecutive columns (plus 16 for values 8-15).
constexpr Coord mma_k32_a(int lane, int value) {
  const int group = lane / 4, thread = lane % 4;
  return {group + 8 * ((value / 4) % 2), 4 * thread + value % 4 + 16 * (value / 8)};
}

// B (32 x 8, column-major): value i is byte i % 4 of register i / 4; row = k.
constexpr Coord mma_k32_b(int lane, int value) {
  const int group = lane / 4, thread = lane % 4;
  return {4 * thread + value % 4 + 16 * (value / 4), group};
}

// C and D (16 x 8, fp32): as for m16n8k16, value i is register i.
constexpr Coord mma_k32_c(int lane, int value) {
  const int group = lane / 4, thread = lane % 4;
  return {group + 8 * (value / 2), 2 * thread + value % 2};
}

}  // namespace mla::simt::sm80_layout
