// run_mla_prefill on a host queue: latents gathered from the paged cache and
// up-projected on the host, attention and merges through the backend.
#include "mla/mla_step.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "mla/context_plan.hpp"
#include "mla/error.hpp"
#include "mla_step_check.hpp"

namespace mla {
namespace {

using detail::MlaStepShape;

// Latent rows [T, L] and rope rows [T, R] of the tokens being projected, fp32.
struct LatentRows {
  std::int64_t tokens = 0;
  std::vector<float> latent;
  std::vector<float> rope;
};

float element(const TensorView& view, std::int64_t i0, std::int64_t i1, std::int64_t i2 = 0) {
  return load_as_float(view.data, view.dtype, view.offset(i0, i1, i2));
}

LatentRows new_token_rows(const MlaStepInputs& in, const MlaStepShape& s) {
  LatentRows rows;
  rows.tokens = s.num_q;
  rows.latent.resize(static_cast<std::size_t>(s.num_q * s.latent));
  rows.rope.resize(static_cast<std::size_t>(s.num_q * s.r));
  for (std::int64_t t = 0; t < s.num_q; ++t) {
    for (int l = 0; l < s.latent; ++l) rows.latent[static_cast<std::size_t>(t * s.latent + l)] = element(in.kv_c, t, l);
    for (int r = 0; r < s.r; ++r) rows.rope[static_cast<std::size_t>(t * s.r + r)] = element(in.k_pe, t, r);
  }
  return rows;
}

// The chunk's context tokens, sequence by sequence, from the paged cache
// (fp8 bytes dequantised by the cache scale).
LatentRows gather_rows(const MlaStepInputs& in, const MlaStepMetadata& md, const MlaStepShape& s,
                       const ContextChunk& chunk) {
  LatentRows rows;
  rows.tokens = chunk.num_tokens();
  rows.latent.resize(static_cast<std::size_t>(rows.tokens * s.latent));
  rows.rope.resize(static_cast<std::size_t>(rows.tokens * s.r));
  const float scale = in.cache.dtype == DType::float8_e4m3 ? in.cache_scale : 1.0f;
  std::int64_t t = 0;
  for (std::size_t b = 0; b + 1 < chunk.cu_seqlens_k.size(); ++b) {
    for (std::int32_t i = 0; i < chunk.length(b); ++i, ++t) {
      const std::int64_t position = chunk.starts[b] + i;
      const std::int64_t block = md.block_table[b * static_cast<std::size_t>(md.max_blocks) +
                                                static_cast<std::size_t>(position / s.block_size)];
      const std::int64_t slot = position % s.block_size;
      for (int l = 0; l < s.latent; ++l) {
        rows.latent[static_cast<std::size_t>(t * s.latent + l)] = element(in.cache, block, slot, l) * scale;
      }
      for (int r = 0; r < s.r; ++r) {
        rows.rope[static_cast<std::size_t>(t * s.r + r)] = element(in.cache, block, slot, s.latent + r) * scale;
      }
    }
  }
  return rows;
}

// kv_b_proj transposed to fp32 [L, H*(P+V)], read once per step, so that the
// projection's inner loop runs along contiguous output columns.
std::vector<float> weight_columns(const TensorView& w) {
  const std::int64_t rows = w.size(0), latent = w.size(1);
  std::vector<float> columns(static_cast<std::size_t>(rows * latent));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t l = 0; l < latent; ++l) columns[static_cast<std::size_t>(l * rows + i)] = element(w, i, l);
  }
  return columns;
}

// k [T, H, P+R] = (latent W_k^T, rope) and v [T, H, V] = latent W_v^T, in
// the backend's dtype. Tiles of tokens x output columns accumulate in fp32
// along l; the inner loop is an independent multiply-add per column, which
// the compiler vectorises without reassociating any sum.
void project(const LatentRows& rows, const std::vector<float>& wt, const MlaStepShape& s, const TensorView& k,
             const TensorView& v) {
  constexpr std::int64_t token_tile = 8;
  constexpr std::int64_t column_tile = 256;
  const std::int64_t width = s.p + s.v;
  const std::int64_t columns = std::int64_t{s.heads} * width;
  std::vector<float> acc(static_cast<std::size_t>(token_tile * column_tile));
  for (std::int64_t t0 = 0; t0 < rows.tokens; t0 += token_tile) {
    const std::int64_t tn = std::min(token_tile, rows.tokens - t0);
    for (std::int64_t c0 = 0; c0 < columns; c0 += column_tile) {
      const std::int64_t cn = std::min(column_tile, columns - c0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t l = 0; l < s.latent; ++l) {
        const float* w_row = wt.data() + l * columns + c0;
        for (std::int64_t t = 0; t < tn; ++t) {
          const float x = rows.latent[static_cast<std::size_t>((t0 + t) * s.latent + l)];
          float* a = acc.data() + t * column_tile;
          for (std::int64_t c = 0; c < cn; ++c) a[c] += x * w_row[c];
        }
      }
      for (std::int64_t t = 0; t < tn; ++t) {
        for (std::int64_t c = 0; c < cn; ++c) {
          const std::int64_t h = (c0 + c) / width, j = (c0 + c) % width;
          const float value = acc[static_cast<std::size_t>(t * column_tile + c)];
          if (j < s.p) {
            store_from_float(k.data, k.dtype, k.offset(t0 + t, h, j), value);
          } else {
            store_from_float(v.data, v.dtype, v.offset(t0 + t, h, j - s.p), value);
          }
        }
      }
    }
  }
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    for (int h = 0; h < s.heads; ++h) {
      for (int r = 0; r < s.r; ++r) {
        store_from_float(k.data, k.dtype, k.offset(t, h, s.p + r), rows.rope[static_cast<std::size_t>(t * s.r + r)]);
      }
    }
  }
}

// Keys and values of up to `tokens` tokens, host memory of the queue.
struct KeyValues {
  OwnedTensor k;
  OwnedTensor v;
  KeyValues(Queue& queue, DType dtype, std::int64_t tokens, const MlaStepShape& s)
      : k(OwnedTensor::host(queue, dtype, {std::max<std::int64_t>(tokens, 1), s.heads, s.p + s.r})),
        v(OwnedTensor::host(queue, dtype, {std::max<std::int64_t>(tokens, 1), s.heads, s.v})) {}
  // The first `tokens` rows.
  static TensorView rows(TensorView view, std::int64_t tokens) {
    view.shape[0] = tokens;
    return view;
  }
};

struct Partial {
  OwnedTensor out;
  OwnedTensor lse;
  Partial(Queue& queue, DType dtype, const MlaStepShape& s)
      : out(OwnedTensor::host(queue, dtype, {s.num_q, s.heads, s.v})),
        lse(OwnedTensor::host(queue, DType::float32, {s.heads, s.num_q})) {}
};

}  // namespace

void run_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepMetadata& metadata,
                     const MlaStepInputs& inputs, const MlaStepOutputs& outputs, std::int64_t workspace_tokens) {
  const BackendParams& params = backend.params();
  const MlaStepShape s = detail::check_mla_step(params, metadata, inputs, outputs);
  if (queue.backend() != DeviceBackend::host) {
    raise(ErrorCategory::not_supported,
          "run_mla_prefill gathers and up-projects on the host so far: " + backend.name() + " on " + queue.describe() +
              " needs GPU kernels for them that are not written yet");
  }
  const ContextPlan plan = plan_context_chunks(metadata.context_lens, workspace_tokens, s.block_size);

  PrefillMetadata step;
  step.cu_seqlens_q = metadata.cu_seqlens_q;
  step.cu_seqlens_k = metadata.cu_seqlens_q;
  step.max_seqlen_q = step.max_seqlen_k = s.num_q == 0 ? 0 : max_seqlen(metadata.cu_seqlens_q);
  for (const ContextChunk& chunk : plan.chunks) step.chunks.push_back({chunk.cu_seqlens_k, chunk.max_seqlen_k});
  backend.prepare(queue, step);

  const std::vector<float> w = weight_columns(inputs.kv_b_proj);
  KeyValues fresh(queue, params.dtype, s.num_q, s);
  project(new_token_rows(inputs, s), w, s, fresh.k.view, fresh.v.view);
  const TensorView k_new = KeyValues::rows(fresh.k.view, s.num_q);
  const TensorView v_new = KeyValues::rows(fresh.v.view, s.num_q);
  const bool want_lse = !outputs.lse.empty_view();
  if (plan.chunks.empty()) {
    backend.run_new_tokens(queue, inputs.q, k_new, v_new, want_lse, outputs.out, std::nullopt,
                           want_lse ? std::optional<TensorView>(outputs.lse) : std::nullopt);
    return;
  }

  // The running result moves between two partials; the last merge writes
  // the caller's out and lse.
  std::int64_t most = 0;
  for (const ContextChunk& chunk : plan.chunks) most = std::max(most, chunk.num_tokens());
  KeyValues context(queue, params.dtype, most, s);
  Partial prefix(queue, params.dtype, s), first(queue, params.dtype, s), second(queue, params.dtype, s);
  backend.run_new_tokens(queue, inputs.q, k_new, v_new, true, first.out.view, std::nullopt, first.lse.view);
  Partial* running = &first;
  Partial* spare = &second;
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    const std::int64_t tokens = plan.chunks[c].num_tokens();
    project(gather_rows(inputs, metadata, s, plan.chunks[c]), w, s, context.k.view, context.v.view);
    backend.run_context_chunk(queue, static_cast<int>(c), inputs.q, KeyValues::rows(context.k.view, tokens),
                              KeyValues::rows(context.v.view, tokens), prefix.out.view, prefix.lse.view);
    const bool last = c + 1 == plan.chunks.size();
    MergeArgs merge;
    merge.prefix_out = prefix.out.view;
    merge.prefix_lse = prefix.lse.view;
    merge.suffix_out = running->out.view;
    merge.suffix_lse = running->lse.view;
    merge.out = last ? outputs.out : spare->out.view;
    merge.out_lse = last ? outputs.lse : spare->lse.view;
    backend.merge_attn_states(queue, merge);
    std::swap(running, spare);
  }
}

}  // namespace mla
