// How a prefill step's cached context is processed in chunks under a
// workspace budget: vLLM's chunked-context planning, for engines that
// gather the context themselves and for the library's whole MLA step.
#pragma once

#include <cstdint>
#include <vector>

namespace mla {

// One chunk: for each of the B sequences, the run of its context tokens the
// chunk covers ([starts[b], starts[b] + length)), as cu_seqlens.
struct ContextChunk {
  std::vector<std::int32_t> starts;        // [B] first context token of each sequence in the chunk
  std::vector<std::int32_t> cu_seqlens_k;  // [B+1] tokens each sequence contributes, cumulated
  int max_seqlen_k = 0;

  std::int64_t num_tokens() const { return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back(); }
  std::int32_t length(std::size_t sequence) const { return cu_seqlens_k[sequence + 1] - cu_seqlens_k[sequence]; }
};

struct ContextPlan {
  // Context tokens per sequence per chunk, a multiple of the block size;
  // sequences in later groups may get more (see plan_context_chunks).
  std::vector<std::int64_t> chunk_size;  // one entry per chunk
  std::vector<ContextChunk> chunks;
};

// Chunks that together cover every context token of every sequence exactly
// once, in order, each gathering at most `workspace_tokens` tokens.
//
// As vLLM plans them: with M sequences that have context, each chunk takes
// round_down(workspace_tokens / M, block_size) tokens of every such sequence,
// and there are as many chunks as the longest context needs. When the
// workspace holds fewer than M blocks, the sequences are taken in groups of
// workspace_tokens / block_size (in batch order), each group planned that way
// in turn; vLLM refuses such a budget. A sequence without context contributes
// nothing to any chunk. Raises Error(invalid_argument) for a block size below
// 1, a workspace smaller than one block, or a negative context length.
ContextPlan plan_context_chunks(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens,
                                int block_size);

// Chunks filled to exactly `workspace_tokens` tokens (the last one less):
// the sequences' contexts laid end to end in batch order and cut every
// `workspace_tokens`, so short contexts share a chunk and a long one runs
// over several. Fewer chunks than plan_context_chunks when the contexts
// differ in length; a gather by cache slot needs no block alignment.
// Raises Error(invalid_argument) for a workspace below 1 token or a negative
// context length. chunk_size holds each chunk's token count.
ContextPlan pack_context_chunks(const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens);

// Raises Error(invalid_argument) naming the chunk and sequence unless `plan`
// has B+1 cu_seqlens_k and B starts per chunk (B = context_lens.size()),
// non-negative runs inside each context, and together covers every context
// token of every sequence exactly once.
void check_context_plan(const ContextPlan& plan, const std::vector<std::int32_t>& context_lens);

}  // namespace mla
