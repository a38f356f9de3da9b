// The sm_90 data layouts the emulator follows, as pure functions, written from
// the PTX ISA (wgmma matrix descriptor format, shared-memory matrix layouts,
// swizzle modes, wgmma register fragments; cp.async.bulk.tensor box layout).
// Host code only; a test cross-checks them against CUTLASS/CuTe.
#pragma once

#include <cstdint>

#include "simt/sm80_layout.hpp"

namespace mla::simt::sm90_layout {

// Swizzle modes by their descriptor encoding (bits 62-63): 0 none, 1 128 B, 2 64 B, 3 32 B.
constexpr unsigned swizzle_span(int mode) { return mode == 1 ? 128u : mode == 2 ? 64u : mode == 3 ? 32u : 0u; }

// The pattern repeats every 8 rows of the span: a swizzled tile starts on this boundary.
constexpr unsigned swizzle_repeat(int mode) { return 8u * swizzle_span(mode); }

// The shared address a 16-byte chunk really occupies: address bits [4, 4+b)
// XOR bits [7, 7+b), b = 3, 2, 1 for 128, 64, 32 B (CuTe's Swizzle<b, 4, 3>).
constexpr std::uint32_t swizzle_address(std::uint32_t address, int mode) {
  switch (mode) {
    case 1:
      return address ^ ((address >> 3) & 0x70u);
    case 2:
      return address ^ ((address >> 3) & 0x30u);
    case 3:
      return address ^ ((address >> 3) & 0x10u);
    default:
      return address;
  }
}

struct Descriptor {
  std::uint32_t start = 0;  // shared address, bytes
  std::uint32_t leading_byte_offset = 0;
  std::uint32_t stride_byte_offset = 0;
  int base_offset = 0;
  int swizzle = 0;  // mode as encoded
};

constexpr Descriptor decode_descriptor(std::uint64_t bits) {
  Descriptor d;
  d.start = static_cast<std::uint32_t>(bits & 0x3fffu) << 4;
  d.leading_byte_offset = static_cast<std::uint32_t>((bits >> 16) & 0x3fffu) << 4;
  d.stride_byte_offset = static_cast<std::uint32_t>((bits >> 32) & 0x3fffu) << 4;
  d.base_offset = static_cast<int>((bits >> 49) & 7u);
  d.swizzle = static_cast<int>((bits >> 62) & 3u);
  return d;
}

// Byte offset from the descriptor's start, before swizzling, of the 16-bit
// element (mn, k) of an operand (A: mn = row m; B: mn = column n), in the
// canonical layouts of the ISA. Core matrices are 8 rows of 16 bytes.
//   K-major, no swizzle: 8 mn-rows of 8 k at 16 B, core matrices along mn at
//     SBO, along k at LBO.
//   K-major, swizzled: rows of the span (span/2 k each), 8-row groups along mn
//     at SBO; LBO unused (k stays inside one span).
//   MN-major, no swizzle: 8 k-rows of 8 mn at 16 B, core matrices along mn at
//     SBO, along k at LBO.
//   MN-major, swizzled: rows of the span (span/2 mn each) for 8 k, blocks of
//     span/2 mn at LBO, groups of 8 k at SBO.
// 8-bit elements (element_bytes 1) are K-major only: a core matrix row then
// holds 16 k, a swizzled row span k.
constexpr std::uint32_t operand_offset(const Descriptor& d, bool mn_major, int mn, int k, int element_bytes = 2) {
  const unsigned span = swizzle_span(d.swizzle);
  const auto u = [](int v) { return static_cast<std::uint32_t>(v); };
  if (!mn_major) {
    const int per_core_row = 16 / element_bytes;
    if (span == 0)
      return u(mn % 8) * 16 + u(mn / 8) * d.stride_byte_offset + u(k % per_core_row * element_bytes) +
             u(k / per_core_row) * d.leading_byte_offset;
    return u(mn % 8) * span + u(mn / 8) * d.stride_byte_offset + u(k * element_bytes);
  }
  if (span == 0)
    return u(mn % 8) * 2 + u(mn / 8) * d.stride_byte_offset + u(k % 8) * 16 + u(k / 8) * d.leading_byte_offset;
  const int per_row = static_cast<int>(span / 2);
  return u(mn % per_row) * 2 + u(mn / per_row) * d.leading_byte_offset + u(k % 8) * span +
         u(k / 8) * d.stride_byte_offset;
}

struct Position {
  int row = 0;
  int col = 0;
};

// wgmma m64nNk16 fp32 accumulator: register i of warpgroup thread `thread`
// (0..127). Warp w owns rows 16w..16w+15; per 8 columns, the mma.m16n8 C layout.
constexpr Position accumulator_position(int thread, int i) {
  const int warp = thread / 32, lane = thread % 32;
  return {16 * warp + lane / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (lane % 4) + i % 2};
}

// wgmma m64k16 A from registers: 16-bit value h (0..7; register h / 2, low
// half first) of warpgroup thread `thread`: the mma.m16n8k16 A layout per warp.
constexpr Position a_fragment_position(int thread, int h) {
  const int warp = thread / 32, lane = thread % 32;
  return {16 * warp + lane / 4 + 8 * ((h / 2) % 2), 2 * (lane % 4) + h % 2 + 8 * (h / 4)};
}

// wgmma m64k32 A from registers, 8-bit elements: value v (0..15; byte v % 4
// of register v / 4) of warpgroup thread `thread`: the mma.m16n8k32 A layout
// (sm80_layout.hpp) per warp, rows 16w..16w+15.
constexpr Position a_fragment_position_k32(int thread, int v) {
  const sm80_layout::Coord at = sm80_layout::mma_k32_a(thread % 32, v);
  return {16 * (thread / 32) + at.row, at.col};
}

}  // namespace mla::simt::sm90_layout
