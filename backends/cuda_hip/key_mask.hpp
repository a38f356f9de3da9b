// docs/contract.md §12 in the GPU kernels of CUDA_FLASH, HOPPER_FLASH and HIP_FLASH: which
// of a call's keys each query sees beyond causality (the top-k bits and the
// window), and each head's sink. Host-device: the kernels, the emulator and
// the host unit tests run the same code.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>

#include "mla/detail/host_device.hpp"

namespace mla::gpu {

// A launch's mask, filled by the backend from the call's AttentionMask and
// the plan's positions. Device pointers.
struct KernelMask {
  // Top-k rows: query i of sequence b reads words + b * batch_stride + i *
  // row_stride. Null: no top-k bits.
  const std::uint32_t* words = nullptr;
  std::int64_t batch_stride = 0;
  std::int64_t row_stride = 0;
  // 0: no window; W: a query at position p sees keys at positions above p - W.
  std::int64_t window = 0;
  // [2B] from the plan's words: per sequence the position of its query 0,
  // then (at B + b) the position of the call's key 0 (§12's positions).
  const std::int32_t* positions = nullptr;
  std::int32_t batch_size = 0;
  // float32 [H] sink logits (natural-log units, -inf: none) at head *
  // sinks_stride; null: no sinks. A split launch applies them in its merge.
  const float* sinks = nullptr;
  std::int64_t sinks_stride = 0;

  MLA_HOST_DEVICE bool masks_keys() const { return words != nullptr || window != 0; }
};

// One query row's part of the mask, in 32-bit positions (the plan's words
// hold them so): what a thread keeps while it masks a tile.
struct RowMask {
  const std::uint32_t* words = nullptr;  // the row's words; null: no top-k bits
  int key_position = 0;                  // position of the call's key 0
  int first = 0;                         // the first of the call's keys the window lets the row see

  // Which of the call's keys [key0, key0 + 32) the row sees, bit t for key0
  // + t: those below `key_end` (its causal end, at most the call's keys),
  // from `first` on, whose top-k bits are set. Reads no word outside those
  // keys' positions.
  MLA_HOST_DEVICE std::uint32_t seen(int key0, int key_end) const {
    const int begin = first > key0 ? first : key0;
    const int end = key_end < key0 + 32 ? key_end : key0 + 32;
    if (begin >= end) return 0;
    const int count = end - begin;
    const int offset = begin - key0;
    const std::uint32_t ones = count == 32 ? ~0u : (1u << count) - 1u;
    if (words == nullptr) return ones << offset;
    const int position = key_position + begin;
    const int shift = position & 31;
    std::uint32_t value = words[position >> 5] >> shift;
    if (shift != 0 && shift + count > 32) value |= words[(position >> 5) + 1] << (32 - shift);
    return (value & ones) << offset;
  }
};

// One sequence's part of the mask, as a block reads it.
struct SequenceMask {
  const std::uint32_t* words = nullptr;  // the sequence's row 0; null: no top-k bits
  std::int64_t row_stride = 0;
  std::int64_t key_position = 0;  // position of the call's key 0
  bool windowed = false;
  std::int64_t window_first = 0;  // with a window: the first call key query 0 sees (may be <= 0)

  // The first of the call's keys the window lets query `row` see (0 or
  // below: every key; without a window, 0).
  MLA_HOST_DEVICE std::int64_t first_key(int row) const {
    if (!windowed) return 0;
    const std::int64_t first = window_first + row;
    return first < 0 ? 0 : first;
  }

  // The key tile (of `cols` keys) that holds the first key the window lets
  // query `row` see, at most `tiles`; 0 without a window.
  MLA_HOST_DEVICE int first_key_tile(int row, int tiles, int cols) const {
    const std::int64_t tile = first_key(row) / cols;
    return tile < tiles ? static_cast<int>(tile) : tiles;
  }

  // Query `row`'s part (key positions fit 32 bits: the plan's words hold them).
  MLA_HOST_DEVICE RowMask row_mask(int row) const {
    RowMask r;
    if (words != nullptr) r.words = words + static_cast<std::int64_t>(row) * row_stride;
    r.key_position = static_cast<int>(key_position);
    const std::int64_t first = first_key(row);
    r.first = first > INT32_MAX ? INT32_MAX : static_cast<int>(first);
    return r;
  }

  // Which of the call's keys [key0, key0 + 32) query `row` sees (RowMask::seen).
  MLA_HOST_DEVICE std::uint32_t seen(int row, int key0, int key_end) const { return row_mask(row).seen(key0, key_end); }
};

MLA_HOST_DEVICE inline SequenceMask sequence_mask(const KernelMask& mask, int seq) {
  SequenceMask m;
  if (!mask.masks_keys()) return m;
  const std::int64_t query_position = mask.positions[seq];
  m.key_position = mask.positions[mask.batch_size + seq];
  if (mask.words != nullptr) m.words = mask.words + static_cast<std::int64_t>(seq) * mask.batch_stride;
  m.row_stride = mask.row_stride;
  m.windowed = mask.window != 0;
  m.window_first = query_position - mask.window + 1 - m.key_position;
  return m;
}

// A head's sink in the scores' log2 units (-inf: none, or a split launch,
// whose merge applies it).
MLA_HOST_DEVICE inline float sink_log2(const KernelMask& mask, int head, bool split) {
  if (mask.sinks == nullptr || split) return -INFINITY;
  return mask.sinks[head * mask.sinks_stride] * 1.4426950408889634f;
}

}  // namespace mla::gpu
