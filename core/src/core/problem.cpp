#include "mla/backend.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {

namespace {

std::vector<std::int32_t> cumulative(const std::vector<int>& lengths, const char* what) {
  std::vector<std::int32_t> cu(lengths.size() + 1, 0);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0)
      raise(ErrorCategory::invalid_argument, fmt::format("{}: negative length {} at {}", what, lengths[i], i));
    total += lengths[i];
    if (total > INT32_MAX) raise(ErrorCategory::invalid_argument, fmt::format("{}: total length exceeds int32", what));
    cu[i + 1] = static_cast<std::int32_t>(total);
  }
  return cu;
}

}  // namespace

int max_seqlen(const std::vector<std::int32_t>& cu) {
  int longest = 0;
  for (std::size_t i = 1; i < cu.size(); ++i) longest = std::max(longest, cu[i] - cu[i - 1]);
  return longest;
}

PrefillMetadata PrefillMetadata::from_lengths(const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                                              bool causal) {
  if (q_lens.size() != k_lens.size()) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("query and key lengths describe different batch sizes ({} vs {})", q_lens.size(), k_lens.size()));
  }
  PrefillMetadata metadata;
  metadata.cu_seqlens_q = cumulative(q_lens, "query lengths");
  metadata.cu_seqlens_k = cumulative(k_lens, "key lengths");
  metadata.max_seqlen_q = max_seqlen(metadata.cu_seqlens_q);
  metadata.max_seqlen_k = max_seqlen(metadata.cu_seqlens_k);
  metadata.causal = causal;
  return metadata;
}

void PrefillMetadata::add_chunk(const std::vector<int>& chunk_k_lens) {
  if (static_cast<int>(chunk_k_lens.size()) != batch_size()) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("context chunk has {} sequences, the batch has {}", chunk_k_lens.size(), batch_size()));
  }
  Chunk chunk;
  chunk.cu_seqlens_k = cumulative(chunk_k_lens, "context chunk lengths");
  chunk.max_seqlen_k = max_seqlen(chunk.cu_seqlens_k);
  chunks.push_back(std::move(chunk));
}

void check_device_metadata(const DevicePrefillMetadata& m) {
  const auto bad = [](const std::string& message) {
    raise(ErrorCategory::invalid_argument, "device metadata: " + message);
  };
  if (m.batch_size < 0) bad(fmt::format("batch_size must not be negative; got {}", m.batch_size));
  if (m.cu_seqlens_q == nullptr || m.cu_seqlens_k == nullptr)
    bad("cu_seqlens_q and cu_seqlens_k are required (B+1 entries each, even for an empty batch)");
  if (m.num_q_tokens < 0 || m.num_k_tokens < 0 || m.num_q_tokens > INT32_MAX || m.num_k_tokens > INT32_MAX) {
    bad(fmt::format("num_q_tokens and num_k_tokens must be in [0, 2^31 - 1]; got {} and {}", m.num_q_tokens,
                    m.num_k_tokens));
  }
  if (m.max_seqlen_q < 0 || m.max_seqlen_k < 0)
    bad(fmt::format("max_seqlen_q/k must not be negative; got {} and {}", m.max_seqlen_q, m.max_seqlen_k));
  // What the host can check of "max_seqlen bounds every sequence" without
  // reading the arrays: B sequences of at most max_seqlen hold the tokens.
  const auto bounds_tokens = [&](std::int64_t max_seqlen, std::int64_t tokens, const std::string& what) {
    if (static_cast<std::int64_t>(m.batch_size) * max_seqlen < tokens) {
      bad(fmt::format("{} = {} cannot bound {} sequences of {} tokens in all", what, max_seqlen, m.batch_size, tokens));
    }
  };
  bounds_tokens(m.max_seqlen_q, m.num_q_tokens, "max_seqlen_q");
  bounds_tokens(m.max_seqlen_k, m.num_k_tokens, "max_seqlen_k");
  const auto aligned = [](const std::int32_t* cu) {
    return reinterpret_cast<std::uintptr_t>(cu) % alignof(std::int32_t) == 0;
  };
  if (!aligned(m.cu_seqlens_q) || !aligned(m.cu_seqlens_k)) bad("cu_seqlens_q and cu_seqlens_k must be 4-byte aligned");
  for (std::size_t c = 0; c < m.chunks.size(); ++c) {
    const DevicePrefillMetadata::Chunk& chunk = m.chunks[c];
    if (chunk.cu_seqlens_k == nullptr) bad(fmt::format("context chunk {}: cu_seqlens_k is required", c));
    if (chunk.num_k_tokens < 0 || chunk.num_k_tokens > INT32_MAX || chunk.max_seqlen_k < 0) {
      bad(
          fmt::format("context chunk {}: num_k_tokens must be in [0, 2^31 - 1] and max_seqlen_k not negative; got {} "
                      "and {}",
                      c, chunk.num_k_tokens, chunk.max_seqlen_k));
    }
    bounds_tokens(chunk.max_seqlen_k, chunk.num_k_tokens, fmt::format("context chunk {}: max_seqlen_k", c));
    if (!aligned(chunk.cu_seqlens_k)) bad(fmt::format("context chunk {}: cu_seqlens_k must be 4-byte aligned", c));
  }
}

void check_cu_seqlens(const std::vector<std::int32_t>& cu, const char* what, std::int64_t total) {
  if (cu.empty())
    raise(ErrorCategory::invalid_argument, fmt::format("{}: needs at least one entry (B+1 values)", what));
  if (cu.front() != 0)
    raise(ErrorCategory::invalid_argument, fmt::format("{}: must start at 0, starts at {}", what, cu.front()));
  for (std::size_t i = 1; i < cu.size(); ++i) {
    if (cu[i] < cu[i - 1]) {
      raise(ErrorCategory::invalid_argument,
            fmt::format("{}: must be non-decreasing, entry {} is {} after {}", what, i, cu[i], cu[i - 1]));
    }
  }
  if (total >= 0 && cu.back() != total) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("{}: last entry {} does not match the {} tokens of the tensor", what, cu.back(), total));
  }
}

void check_metadata(const PrefillMetadata& metadata) {
  check_cu_seqlens(metadata.cu_seqlens_q, "cu_seqlens_q");
  check_cu_seqlens(metadata.cu_seqlens_k, "cu_seqlens_k");
  if (metadata.cu_seqlens_k.size() != metadata.cu_seqlens_q.size()) {
    raise(ErrorCategory::invalid_argument, fmt::format("cu_seqlens_q has {} entries but cu_seqlens_k has {}",
                                                       metadata.cu_seqlens_q.size(), metadata.cu_seqlens_k.size()));
  }
  // Causal rows with more queries than keys are allowed: with the bottom-right
  // aligned mask their first queries see no key and give 0 / -inf (docs/contract.md §2).
  if (metadata.max_seqlen_q < max_seqlen(metadata.cu_seqlens_q) ||
      metadata.max_seqlen_k < max_seqlen(metadata.cu_seqlens_k)) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("max_seqlen_q/k ({}, {}) are smaller than the longest sequences ({}, {})", metadata.max_seqlen_q,
                      metadata.max_seqlen_k, max_seqlen(metadata.cu_seqlens_q), max_seqlen(metadata.cu_seqlens_k)));
  }
  for (std::size_t c = 0; c < metadata.chunks.size(); ++c) {
    const auto& chunk = metadata.chunks[c];
    const std::string what = fmt::format("context chunk {} cu_seqlens_k", c);
    check_cu_seqlens(chunk.cu_seqlens_k, what.c_str());
    if (chunk.cu_seqlens_k.size() != metadata.cu_seqlens_q.size()) {
      raise(ErrorCategory::invalid_argument, fmt::format("{} has {} entries, cu_seqlens_q has {}", what,
                                                         chunk.cu_seqlens_k.size(), metadata.cu_seqlens_q.size()));
    }
    if (chunk.max_seqlen_k < max_seqlen(chunk.cu_seqlens_k)) {
      raise(ErrorCategory::invalid_argument, fmt::format("{}: max_seqlen_k {} is smaller than the longest sequence {}",
                                                         what, chunk.max_seqlen_k, max_seqlen(chunk.cu_seqlens_k)));
    }
  }
}

}  // namespace mla
