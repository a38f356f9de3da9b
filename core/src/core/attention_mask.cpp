// Attention masks (docs/contract.md §12): the checks every backend's calls run
// on them, where a call's rows and keys lie in each sequence's whole key
// range, and top-k masks built on the host.
#include "mla/attention_mask.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "core/overlap.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

[[noreturn]] void bad_argument(const std::string& message) { raise(ErrorCategory::invalid_argument, message); }

std::int64_t longest(const std::vector<std::int64_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

std::vector<std::int64_t> query_lengths(const PrefillMetadata& metadata) {
  std::vector<std::int64_t> lengths;
  for (std::size_t b = 0; b + 1 < metadata.cu_seqlens_q.size(); ++b)
    lengths.push_back(metadata.cu_seqlens_q[b + 1] - metadata.cu_seqlens_q[b]);
  return lengths;
}

void check_topk(const TopkMask& topk, const AttentionPlan& plan, const Queue& queue, const std::string& who) {
  const std::string what = who + ": the top-k mask";
  if (topk.batch_size != plan.batch_size) {
    bad_argument(fmt::format("{} has {} sequences but the plan has {}", what, topk.batch_size, plan.batch_size));
  }
  if (topk.rows < 0 || topk.words_per_row < 1) {
    bad_argument(
        fmt::format("{} needs rows >= 0 and words_per_row >= 1; got {} and {}", what, topk.rows, topk.words_per_row));
  }
  // A stride over an extent of 1 is never used (PyTorch's DLPack export
  // writes 1 there): only the strides that step are checked.
  const bool bad_rows = topk.rows > 1 && (topk.row_stride < topk.words_per_row || topk.row_stride % 4 != 0);
  const bool bad_batches = topk.batch_size > 1 && (topk.batch_stride % 4 != 0 || topk.batch_stride < 0);
  if (bad_rows || bad_batches) {
    bad_argument(
        fmt::format("{} needs a row stride of at least words_per_row ({}) and both strides in multiples of 4 words "
                    "(16 bytes); got row_stride {} and batch_stride {}",
                    what, topk.words_per_row, topk.row_stride, topk.batch_stride));
  }
  if (topk.batch_size > 1 && topk.batch_stride < topk.rows * topk.row_stride) {
    bad_argument(fmt::format("{}'s sequences overlap: batch_stride {} is below rows x row_stride = {}", what,
                             topk.batch_stride, topk.rows * topk.row_stride));
  }
  if (reinterpret_cast<std::uintptr_t>(topk.words) % 16 != 0) {
    bad_argument(fmt::format("{}'s words must be 16-byte aligned; they start at {}", what,
                             static_cast<const void*>(topk.words)));
  }
  if (!queue.can_access(topk.memory)) {
    bad_argument(fmt::format("{} is in {} memory, which the queue {} cannot access", what,
                             memory_kind_name(topk.memory), queue.describe()));
  }
  if (!plan.lengths) return;  // a device plan's lengths are the caller's to keep within the mask
  const std::int64_t rows = longest(query_lengths(*plan.lengths));
  if (topk.rows < rows) {
    bad_argument(fmt::format("{} has {} rows per sequence but a sequence has {} queries", what, topk.rows, rows));
  }
  const std::int64_t keys = longest(whole_key_lengths(*plan.lengths));
  if (topk.words_per_row * 32 < keys) {
    bad_argument(
        fmt::format("{}'s {} words per row cover {} key positions but a sequence has {} keys (context and "
                    "new); it needs {} words",
                    what, topk.words_per_row, topk.words_per_row * 32, keys, (keys + 31) / 32));
  }
}

}  // namespace

std::vector<std::int64_t> whole_key_lengths(const PrefillMetadata& metadata) {
  std::vector<std::int64_t> lengths;
  for (std::size_t b = 0; b + 1 < metadata.cu_seqlens_k.size(); ++b) {
    std::int64_t keys = metadata.cu_seqlens_k[b + 1] - metadata.cu_seqlens_k[b];
    for (const PrefillMetadata::Chunk& chunk : metadata.chunks) {
      if (b + 1 < chunk.cu_seqlens_k.size()) keys += chunk.cu_seqlens_k[b + 1] - chunk.cu_seqlens_k[b];
    }
    lengths.push_back(keys);
  }
  return lengths;
}

std::int64_t topk_mask_words(std::int64_t max_keys) {
  const std::int64_t words = (std::max<std::int64_t>(max_keys, 0) + 31) / 32;
  return std::max<std::int64_t>((words + 3) / 4 * 4, 4);
}

MaskPositions mask_positions(const PrefillMetadata& metadata, int chunk) {
  MaskPositions positions;
  for (std::size_t b = 0; b + 1 < metadata.cu_seqlens_q.size(); ++b) {
    std::int64_t context = 0, before_chunk = 0;
    for (std::size_t c = 0; c < metadata.chunks.size(); ++c) {
      const std::vector<std::int32_t>& cu = metadata.chunks[c].cu_seqlens_k;
      const std::int64_t keys = cu[b + 1] - cu[b];
      if (static_cast<int>(c) < chunk) before_chunk += keys;
      context += keys;
    }
    const std::int64_t sq = metadata.cu_seqlens_q[b + 1] - metadata.cu_seqlens_q[b];
    const std::int64_t sk = metadata.cu_seqlens_k[b + 1] - metadata.cu_seqlens_k[b];
    // Query i lines up with the last key it sees causally (bottom-right).
    positions.query.push_back(context + sk - sq);
    positions.key.push_back(chunk < 0 ? context : before_chunk);
  }
  return positions;
}

void check_attention_mask(const PrefillBackend& backend, const AttentionPlan& plan, const Queue& queue,
                          const AttentionMask& mask, const std::optional<TensorView>& out,
                          const std::optional<TensorView>& lse, const char* who) {
  if (mask.empty()) return;
  const std::string caller = who;
  if (!backend.takes_attention_masks()) {
    raise(ErrorCategory::not_supported, caller + ": " + backend.name() +
                                            " takes no top-k masks, windows or sinks yet (docs/contract.md §12); "
                                            "every built-in backend does");
  }
  if (mask.window < 0 || mask.window > std::numeric_limits<std::int32_t>::max()) {
    bad_argument(fmt::format("{}: window must be 0 (none) or a key count from 1 to {}; got {}", caller,
                             std::numeric_limits<std::int32_t>::max(), mask.window));
  }
  if (!mask.topk.empty()) check_topk(mask.topk, plan, queue, caller);
  if (mask.has_sinks()) {
    check_sinks(mask.sinks, backend.params().num_heads, caller);
    check_accessible(queue, mask.sinks, "sinks");
  }
  std::vector<detail::Operand> inputs;
  detail::add_mask_operands(inputs, mask);
  detail::check_no_overlap(caller, {{"out", out}, {"lse", lse}}, inputs);
}

std::vector<float> read_sinks(Queue& queue, const TensorView& sinks, int heads) {
  if (sinks.empty_view()) return {};
  std::vector<float> values(static_cast<std::size_t>(heads));
  for (int h = 0; h < heads; ++h) {
    const auto* at = static_cast<const float*>(sinks.data) + h * sinks.stride[0];
    queue.memcpy(&values[static_cast<std::size_t>(h)], at, sizeof(float));
  }
  queue.wait();
  for (std::size_t h = 0; h < values.size(); ++h) {
    const float value = values[h];
    if (std::isnan(value) || value == std::numeric_limits<float>::infinity()) {
      bad_argument(fmt::format("sinks must be finite or -inf (no sink); head {} has {}", h, value));
    }
  }
  return values;
}

HostTopkMask::HostTopkMask(const PrefillMetadata& metadata)
    : rows_(query_lengths(metadata)),
      whole_(whole_key_lengths(metadata)),
      row_count_(longest(rows_)),
      words_per_row_(topk_mask_words(longest(whole_))) {
  const std::size_t words =
      std::max<std::size_t>(static_cast<std::size_t>(rows_.size() * row_count_ * words_per_row_), 16);
  // aligned_alloc takes whole multiples of the alignment.
  const std::size_t bytes = (words * sizeof(std::uint32_t) + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, bytes);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, bytes);
  words_ = std::shared_ptr<std::uint32_t>(static_cast<std::uint32_t*>(memory), [](std::uint32_t* p) { std::free(p); });
}

HostTopkMask HostTopkMask::from_indices(const PrefillMetadata& metadata, const std::int32_t* indices, std::int64_t k,
                                        std::int64_t row_stride) {
  check_metadata(metadata);
  const std::int64_t tokens = metadata.num_q_tokens();
  if (k < 0 || (tokens > 0 && k > 0 && (indices == nullptr || row_stride < k))) {
    bad_argument(fmt::format("top-k indices need k >= 0, data and a row stride of at least k; got k {}, row_stride {}",
                             k, row_stride));
  }
  HostTopkMask mask(metadata);
  // Every index is checked before any bit is set: a refused list builds nothing.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t b = 0; b < mask.rows_.size(); ++b) {
      const std::int64_t first = metadata.cu_seqlens_q[b];
      for (std::int64_t i = 0; i < mask.rows_[b]; ++i) {
        const std::int32_t* row = indices + (first + i) * row_stride;
        for (std::int64_t slot = 0; slot < k; ++slot) {
          const std::int32_t position = row[slot];
          if (position == -1) continue;
          if (pass == 0 && (position < 0 || position >= mask.whole_[b])) {
            bad_argument(fmt::format("top-k index {} of token {} (sequence {}) is {}, outside [0, {}) and not -1", slot,
                                     first + i, b, position, mask.whole_[b]));
          }
          if (pass == 1) mask.allow(static_cast<int>(b), i, position);
        }
      }
    }
  }
  return mask;
}

void HostTopkMask::allow(int sequence, std::int64_t row, std::int64_t position) {
  if (sequence < 0 || static_cast<std::size_t>(sequence) >= rows_.size() || row < 0 ||
      row >= rows_[static_cast<std::size_t>(sequence)] || position < 0 ||
      position >= whole_[static_cast<std::size_t>(sequence)]) {
    bad_argument(fmt::format("HostTopkMask::allow: sequence {}, row {}, position {} is outside the mask", sequence, row,
                             position));
  }
  std::uint32_t* at = words_.get() + (sequence * row_count_ + row) * words_per_row_ + position / 32;
  *at |= 1u << (position % 32);
}

bool HostTopkMask::allows(int sequence, std::int64_t row, std::int64_t position) const {
  if (sequence < 0 || static_cast<std::size_t>(sequence) >= rows_.size() || row < 0 ||
      row >= rows_[static_cast<std::size_t>(sequence)] || position < 0 || position >= words_per_row_ * 32) {
    return false;
  }
  const std::uint32_t word = words_.get()[(sequence * row_count_ + row) * words_per_row_ + position / 32];
  return ((word >> (position % 32)) & 1u) != 0;
}

TopkMask HostTopkMask::view() const {
  return TopkMask::contiguous(words_.get(), static_cast<std::int64_t>(rows_.size()), row_count_, words_per_row_);
}

}  // namespace mla
