#include "mla/mla_step.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

[[noreturn]] void bad(const std::string& message) { raise(ErrorCategory::invalid_argument, message); }

void check_lengths(const std::vector<std::int32_t>& context_lens) {
  for (std::size_t b = 0; b < context_lens.size(); ++b) {
    if (context_lens[b] < 0) {
      bad("context_lens[" + std::to_string(b) + "] = " + std::to_string(context_lens[b]) + " is negative");
    }
  }
}

// cu_seqlens_k and max_seqlen_k of a chunk whose runs are `lengths`.
void finish_chunk(const std::vector<std::int32_t>& lengths, ContextChunk& out) {
  out.cu_seqlens_k.assign(1, 0);
  std::int64_t total = 0;
  for (std::int32_t length : lengths) {
    total += length;
    if (total > std::numeric_limits<std::int32_t>::max()) {
      bad("a context chunk of more than 2^31-1 tokens does not fit int32 cu_seqlens; use a smaller workspace");
    }
    out.cu_seqlens_k.push_back(static_cast<std::int32_t>(total));
    out.max_seqlen_k = std::max(out.max_seqlen_k, static_cast<int>(length));
  }
}

void check_plan_args(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens, int block_size) {
  if (block_size < 1) {
    raise(ErrorCategory::invalid_argument, "block size must be at least 1, got " + std::to_string(block_size));
  }
  if (workspace_tokens < block_size) {
    raise(ErrorCategory::invalid_argument, "a workspace of " + std::to_string(workspace_tokens) +
                                               " tokens cannot hold one block of " + std::to_string(block_size) +
                                               " tokens");
  }
  check_lengths(context_lens);
}

// The chunks of one group of sequences, each taking `chunk` tokens of every
// sequence in the group.
void plan_group(const std::vector<std::int32_t>& context_lens, const std::vector<std::size_t>& group,
                std::int64_t chunk, ContextPlan& plan) {
  std::int64_t longest = 0;
  for (std::size_t b : group) longest = std::max<std::int64_t>(longest, context_lens[b]);
  const std::int64_t count = (longest + chunk - 1) / chunk;
  const std::size_t batch = context_lens.size();
  for (std::int64_t c = 0; c < count; ++c) {
    ContextChunk out;
    out.starts.assign(batch, 0);
    std::vector<std::int32_t> lengths(batch, 0);
    for (std::size_t b : group) {
      const std::int64_t start = c * chunk;
      const std::int64_t end = std::min<std::int64_t>(context_lens[b], start + chunk);
      out.starts[b] = static_cast<std::int32_t>(std::min<std::int64_t>(start, context_lens[b]));
      lengths[b] = static_cast<std::int32_t>(std::max<std::int64_t>(end - start, 0));
    }
    finish_chunk(lengths, out);
    plan.chunk_size.push_back(chunk);
    plan.chunks.push_back(std::move(out));
  }
}

}  // namespace

ContextPlan plan_context_chunks(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens,
                                int block_size) {
  check_plan_args(context_lens, workspace_tokens, block_size);
  std::vector<std::size_t> with_context;
  for (std::size_t b = 0; b < context_lens.size(); ++b) {
    if (context_lens[b] > 0) with_context.push_back(b);
  }
  ContextPlan plan;
  // As many sequences per group as the workspace holds blocks: all of them
  // (vLLM's plan) unless the budget is tighter than one block each.
  const auto group_size = static_cast<std::size_t>(
      std::min<std::int64_t>(static_cast<std::int64_t>(with_context.size()), workspace_tokens / block_size));
  for (std::size_t first = 0; first < with_context.size(); first += group_size) {
    const std::size_t last = std::min(with_context.size(), first + group_size);
    const std::vector<std::size_t> group(with_context.begin() + static_cast<std::ptrdiff_t>(first),
                                         with_context.begin() + static_cast<std::ptrdiff_t>(last));
    const auto members = static_cast<std::int64_t>(group.size());
    const std::int64_t chunk = workspace_tokens / members / block_size * block_size;
    plan_group(context_lens, group, chunk, plan);
  }
  return plan;
}

ContextPlan pack_context_chunks(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens) {
  if (workspace_tokens < 1) {
    bad("a workspace of " + std::to_string(workspace_tokens) + " tokens cannot hold one context token");
  }
  check_lengths(context_lens);
  const std::size_t batch = context_lens.size();
  ContextPlan plan;
  ContextChunk chunk;
  std::vector<std::int32_t> lengths(batch, 0);
  std::int64_t filled = 0;
  const auto close_chunk = [&] {
    finish_chunk(lengths, chunk);
    plan.chunk_size.push_back(filled);
    plan.chunks.push_back(std::move(chunk));
    chunk = ContextChunk{};
    lengths.assign(batch, 0);
    filled = 0;
  };
  chunk.starts.assign(batch, 0);
  for (std::size_t b = 0; b < batch; ++b) {
    std::int64_t next = 0;  // first token of sequence b not yet in a chunk
    while (next < context_lens[b]) {
      if (filled == workspace_tokens) {
        close_chunk();
        chunk.starts.assign(batch, 0);
      }
      const std::int64_t take = std::min<std::int64_t>(context_lens[b] - next, workspace_tokens - filled);
      chunk.starts[b] = static_cast<std::int32_t>(next);
      lengths[b] = static_cast<std::int32_t>(take);
      filled += take;
      next += take;
    }
  }
  if (filled > 0) close_chunk();
  return plan;
}

void check_context_plan(const ContextPlan& plan, const std::vector<std::int32_t>& context_lens) {
  check_lengths(context_lens);
  const std::size_t batch = context_lens.size();
  // Per sequence, its runs (start, length) over all chunks.
  std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> runs(batch);
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    const ContextChunk& chunk = plan.chunks[c];
    const std::string name = "context chunk " + std::to_string(c);
    if (chunk.starts.size() != batch || chunk.cu_seqlens_k.size() != batch + 1) {
      bad(name + " has " + std::to_string(chunk.starts.size()) + " starts and " +
          std::to_string(chunk.cu_seqlens_k.size()) + " cu_seqlens_k entries; the step has " + std::to_string(batch) +
          " sequences");
    }
    check_cu_seqlens(chunk.cu_seqlens_k, (name + " cu_seqlens_k").c_str());
    for (std::size_t b = 0; b < batch; ++b) {
      const std::int32_t start = chunk.starts[b], length = chunk.length(b);
      if (length > chunk.max_seqlen_k) {
        bad(name + ": sequence " + std::to_string(b) + " has " + std::to_string(length) +
            " tokens, more than its max_seqlen_k " + std::to_string(chunk.max_seqlen_k));
      }
      if (length == 0) continue;
      if (start < 0 || std::int64_t{start} + length > context_lens[b]) {
        bad(name + ": sequence " + std::to_string(b) + "'s tokens [" + std::to_string(start) + ", " +
            std::to_string(std::int64_t{start} + length) + ") are not inside its " + std::to_string(context_lens[b]) +
            " context tokens");
      }
      runs[b].emplace_back(start, length);
    }
  }
  for (std::size_t b = 0; b < batch; ++b) {
    std::sort(runs[b].begin(), runs[b].end());
    std::int64_t covered = 0;
    for (const auto& [start, length] : runs[b]) {
      if (start != covered) {
        bad("the context chunks " + std::string(start < covered ? "cover twice" : "miss") + " context token " +
            std::to_string(std::min<std::int64_t>(start, covered)) + " of sequence " + std::to_string(b));
      }
      covered += length;
    }
    if (covered != context_lens[b]) {
      bad("the context chunks miss context token " + std::to_string(covered) + " of sequence " + std::to_string(b));
    }
  }
}

}  // namespace mla
