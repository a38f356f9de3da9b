// docs/contract.md §12 in the GPU kernels of CUDA_FLASH and HIP_FLASH: which
// of a call's keys each query sees beyond causality (the top-k bits and the
// window), and each head's sink. Host-device: the kernels, the emulator and
// the host unit tests run the same code.
#pragma once

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

  // The top-k bits of query `row` for the call's keys [key, key + count),
  // 1 <= count <= 32, bit t standing for key + t; reads no word outside
  // those keys' positions.
  MLA_HOST_DEVICE std::uint32_t bits(int row, std::int64_t key, int count) const {
    const std::uint32_t* r = words + static_cast<std::int64_t>(row) * row_stride;
    const std::int64_t position = key_position + key;
    const std::int64_t word = position >> 5;
    const int shift = static_cast<int>(position & 31);
    std::uint32_t value = r[word] >> shift;
    if (shift != 0 && shift + count > 32) value |= r[word + 1] << (32 - shift);
    return count < 32 ? value & ((1u << count) - 1u) : value;
  }

  // Which of the call's keys [key0, key0 + 32) query `row` sees, bit t for
  // key0 + t: those below `key_end` (its causal end, at most the call's
  // keys), from its window's first key on, whose top-k bits are set.
  MLA_HOST_DEVICE std::uint32_t seen(int row, std::int64_t key0, std::int64_t key_end) const {
    const std::int64_t first = first_key(row);
    const std::int64_t begin = first > key0 ? first : key0;
    const std::int64_t end = key_end < key0 + 32 ? key_end : key0 + 32;
    if (begin >= end) return 0;
    const int count = static_cast<int>(end - begin);
    const int offset = static_cast<int>(begin - key0);
    const std::uint32_t range = (count == 32 ? ~0u : (1u << count) - 1u) << offset;
    if (words == nullptr) return range;
    return bits(row, begin, count) << offset;
  }
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
