#include "mla/context_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "mla/error.hpp"

namespace mla {
namespace {

void check_plan_args(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens, int block_size) {
  if (block_size < 1) {
    raise(ErrorCategory::invalid_argument, "block size must be at least 1, got " + std::to_string(block_size));
  }
  if (workspace_tokens < block_size) {
    raise(ErrorCategory::invalid_argument, "a workspace of " + std::to_string(workspace_tokens) +
                                               " tokens cannot hold one block of " + std::to_string(block_size) +
                                               " tokens");
  }
  for (std::size_t b = 0; b < context_lens.size(); ++b) {
    if (context_lens[b] < 0) {
      raise(ErrorCategory::invalid_argument,
            "context_lens[" + std::to_string(b) + "] = " + std::to_string(context_lens[b]) + " is negative");
    }
  }
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
    out.cu_seqlens_k.assign(1, 0);
    std::int64_t total = 0;
    for (std::int32_t length : lengths) {
      total += length;
      if (total > std::numeric_limits<std::int32_t>::max()) {
        raise(ErrorCategory::invalid_argument,
              "a context chunk of more than 2^31-1 tokens does not fit int32 "
              "cu_seqlens; use a smaller workspace");
      }
      out.cu_seqlens_k.push_back(static_cast<std::int32_t>(total));
      out.max_seqlen_k = std::max(out.max_seqlen_k, static_cast<int>(length));
    }
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

}  // namespace mla
