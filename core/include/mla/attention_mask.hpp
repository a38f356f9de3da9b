// Top-k key masks on the host (docs/contract.md §12): the shape a step's
// mask takes and a mask built from per-query index lists, the form
// DeepSeek-V3.2's indexer gives (vLLM's topk_indices).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mla/backend.hpp"

namespace mla {

// Each sequence's whole key range under `metadata`: its keys in every
// context chunk plus its new-token keys (§12's positions run over it).
std::vector<std::int64_t> whole_key_lengths(const PrefillMetadata& metadata);

// Words per mask row that cover `max_keys` positions, rounded as vLLM rounds
// them: ceil(max_keys / 32) up to a multiple of 4, at least 4.
std::int64_t topk_mask_words(std::int64_t max_keys);

// A top-k mask in host memory (64-byte aligned), owned: B sequences of
// max_seqlen_q rows of topk_mask_words(longest whole key range) words.
class HostTopkMask {
 public:
  // Every bit clear: no query sees a key until allow() is called.
  explicit HostTopkMask(const PrefillMetadata& metadata);

  // The mask of per-query index lists: row t of `indices` (query token t of
  // the metadata, `row_stride` int32 apart, `k` of them) holds positions in
  // its sequence's whole key range; -1 is ignored. Any other negative index,
  // or one at or past the sequence's whole key count, is refused with
  // Error(invalid_argument) naming the token, the slot and the bound.
  static HostTopkMask from_indices(const PrefillMetadata& metadata, const std::int32_t* indices, std::int64_t k,
                                   std::int64_t row_stride);

  // Lets query `row` of sequence `sequence` see the key at `position`;
  // Error(invalid_argument) outside the sequence's rows and whole range.
  void allow(int sequence, std::int64_t row, std::int64_t position);

  // Whether that bit is set (false outside the mask).
  bool allows(int sequence, std::int64_t row, std::int64_t position) const;

  // The mask as the attention calls take it (host memory).
  TopkMask view() const;
  std::uint32_t* data() { return words_.get(); }

 private:
  std::vector<std::int64_t> rows_;   // query count per sequence
  std::vector<std::int64_t> whole_;  // whole key range per sequence
  std::int64_t row_count_ = 0;       // rows per sequence in the buffer
  std::int64_t words_per_row_ = 0;
  std::shared_ptr<std::uint32_t> words_;
};

}  // namespace mla
