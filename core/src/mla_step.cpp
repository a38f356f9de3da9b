// run_mla_prefill: the step's keys and values gathered and up-projected by
// the backend on its own queue (PrefillBackend::gather_latents and
// project_latents), attention and merges through the backend as well.
#include "mla/mla_step.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "mla/context_plan.hpp"
#include "mla/error.hpp"
#include "mla_step_check.hpp"

namespace mla {
namespace {

using detail::MlaStepShape;

// Events between the phases when the caller wants their times; nothing otherwise.
class PhaseClock {
 public:
  PhaseClock(Queue& queue, MlaStepPhases* phases) : queue_(queue), phases_(phases) {
    if (phases_ != nullptr) {
      *phases_ = MlaStepPhases{};
      last_ = queue_.record();
    }
  }
  // The work enqueued since the previous call was `phase`'s.
  void done(double MlaStepPhases::*phase) {
    if (phases_ == nullptr) return;
    Event now = queue_.record();
    spans_.push_back({phase, last_, now});
    last_ = now;
  }
  // Waits for the queue and adds the spans up.
  void finish() {
    if (phases_ == nullptr) return;
    queue_.wait();
    for (const Span& span : spans_) phases_->*span.phase += Event::elapsed_ms(span.start, span.end);
  }

 private:
  struct Span {
    double MlaStepPhases::*phase;
    Event start, end;
  };
  Queue& queue_;
  MlaStepPhases* phases_;
  Event last_;
  std::vector<Span> spans_;
};

// Keys and values of up to `tokens` tokens, and the float32 latents they are
// projected from, in the queue's device memory.
struct KeyValues {
  OwnedTensor latents;
  OwnedTensor k;
  OwnedTensor v;
  KeyValues(Queue& queue, DType dtype, std::int64_t tokens, const MlaStepShape& s)
      : latents(OwnedTensor::device(queue, DType::float32, {std::max<std::int64_t>(tokens, 1), s.latent})),
        k(OwnedTensor::device(queue, dtype, {std::max<std::int64_t>(tokens, 1), s.heads, s.p + s.r})),
        v(OwnedTensor::device(queue, dtype, {std::max<std::int64_t>(tokens, 1), s.heads, s.v})) {}
  // The first `tokens` rows of a view.
  static TensorView rows(TensorView view, std::int64_t tokens) {
    view.shape[0] = tokens;
    return view;
  }
  // Gathers `gather` and projects it through kv_b_proj into the first rows.
  void fill(PrefillBackend& backend, Queue& queue, const LatentGather& gather, const TensorView& kv_b_proj,
            PhaseClock& clock);
};

struct Partial {
  OwnedTensor out;
  OwnedTensor lse;
  Partial(Queue& queue, DType dtype, const MlaStepShape& s)
      : out(OwnedTensor::device(queue, dtype, {s.num_q, s.heads, s.v})),
        lse(OwnedTensor::device(queue, DType::float32, {s.heads, s.num_q})) {}
};

void KeyValues::fill(PrefillBackend& backend, Queue& queue, const LatentGather& gather, const TensorView& kv_b_proj,
                     PhaseClock& clock) {
  const TensorView x = rows(latents.view, gather.tokens), keys = rows(k.view, gather.tokens);
  backend.gather_latents(queue, gather, x, keys);
  clock.done(&MlaStepPhases::gather_ms);
  backend.project_latents(queue, x, kv_b_proj, keys, rows(v.view, gather.tokens));
  clock.done(&MlaStepPhases::projection_ms);
}

// The cache slot of every context token of every chunk, chunk after chunk.
std::vector<std::int64_t> chunk_slots(const MlaStepMetadata& md, const MlaStepShape& s, const ContextPlan& plan) {
  std::vector<std::int64_t> slots;
  for (const ContextChunk& chunk : plan.chunks) {
    for (std::size_t b = 0; b + 1 < chunk.cu_seqlens_k.size(); ++b) {
      for (std::int32_t i = 0; i < chunk.length(b); ++i) {
        const std::int64_t position = chunk.starts[b] + i;
        const std::int64_t block = md.block_table[b * static_cast<std::size_t>(md.max_blocks) +
                                                  static_cast<std::size_t>(position / s.block_size)];
        slots.push_back(block * s.block_size + position % s.block_size);
      }
    }
  }
  return slots;
}

}  // namespace

void run_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepMetadata& metadata,
                     const MlaStepInputs& inputs, const MlaStepOutputs& outputs, std::int64_t workspace_tokens,
                     MlaStepPhases* phases) {
  const BackendParams& params = backend.params();
  const MlaStepShape s = detail::check_mla_step(params, metadata, inputs, outputs);
  const ContextPlan plan = plan_context_chunks(metadata.context_lens, workspace_tokens, s.block_size);

  PrefillMetadata step;
  step.cu_seqlens_q = metadata.cu_seqlens_q;
  step.cu_seqlens_k = metadata.cu_seqlens_q;
  step.max_seqlen_q = step.max_seqlen_k = max_seqlen(metadata.cu_seqlens_q);
  for (const ContextChunk& chunk : plan.chunks) step.chunks.push_back({chunk.cu_seqlens_k, chunk.max_seqlen_k});
  backend.prepare(queue, step);

  // Everything the step needs is allocated (and the chunks' cache slots
  // uploaded: the copy reads the host vector before it returns, as device
  // metadata uploads rely on too) before the clock starts, so the phases
  // time only the backend's work.
  KeyValues fresh(queue, params.dtype, s.num_q, s);
  std::int64_t most = 0;
  for (const ContextChunk& chunk : plan.chunks) most = std::max(most, chunk.num_tokens());
  std::optional<KeyValues> context;
  std::optional<Partial> prefix, first, second;
  const std::vector<std::int64_t> slots = chunk_slots(metadata, s, plan);
  UsmBuffer slot_buffer;
  if (!plan.chunks.empty()) {
    context.emplace(queue, params.dtype, most, s);
    prefix.emplace(queue, params.dtype, s);
    first.emplace(queue, params.dtype, s);
    second.emplace(queue, params.dtype, s);
    slot_buffer = UsmBuffer::device(queue, slots.size() * sizeof(std::int64_t));
    queue.memcpy(slot_buffer.get(), slots.data(), slots.size() * sizeof(std::int64_t));
  }

  PhaseClock clock(queue, phases);
  LatentGather fresh_rows;
  fresh_rows.kv_c = inputs.kv_c;
  fresh_rows.k_pe = inputs.k_pe;
  fresh_rows.tokens = s.num_q;
  fresh.fill(backend, queue, fresh_rows, inputs.kv_b_proj, clock);
  const TensorView k_new = KeyValues::rows(fresh.k.view, s.num_q);
  const TensorView v_new = KeyValues::rows(fresh.v.view, s.num_q);
  const bool want_lse = !outputs.lse.empty_view();
  if (plan.chunks.empty()) {
    backend.run_new_tokens(queue, inputs.q, k_new, v_new, want_lse, outputs.out, std::nullopt,
                           want_lse ? std::optional<TensorView>(outputs.lse) : std::nullopt);
    clock.done(&MlaStepPhases::attention_ms);
    clock.finish();
    return;
  }

  // The running result moves between two partials; the last merge writes
  // the caller's out and lse.
  backend.run_new_tokens(queue, inputs.q, k_new, v_new, true, first->out.view, std::nullopt, first->lse.view);
  clock.done(&MlaStepPhases::attention_ms);
  Partial* running = &*first;
  Partial* spare = &*second;
  std::int64_t slot_offset = 0;
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    const std::int64_t tokens = plan.chunks[c].num_tokens();
    LatentGather cached;
    cached.cache = inputs.cache;
    cached.slots = slot_buffer.as<const std::int64_t>() + slot_offset;
    cached.tokens = tokens;
    cached.scale = inputs.cache.dtype == DType::float8_e4m3 ? inputs.cache_scale : 1.0f;
    slot_offset += tokens;
    context->fill(backend, queue, cached, inputs.kv_b_proj, clock);
    backend.run_context_chunk(queue, static_cast<int>(c), inputs.q, KeyValues::rows(context->k.view, tokens),
                              KeyValues::rows(context->v.view, tokens), prefix->out.view, prefix->lse.view);
    clock.done(&MlaStepPhases::attention_ms);
    const bool last = c + 1 == plan.chunks.size();
    MergeArgs merge;
    merge.prefix_out = prefix->out.view;
    merge.prefix_lse = prefix->lse.view;
    merge.suffix_out = running->out.view;
    merge.suffix_lse = running->lse.view;
    merge.out = last ? outputs.out : spare->out.view;
    merge.out_lse = last ? outputs.lse : spare->lse.view;
    backend.merge_attn_states(queue, merge);
    clock.done(&MlaStepPhases::merge_ms);
    std::swap(running, spare);
  }
  clock.finish();
}

}  // namespace mla
