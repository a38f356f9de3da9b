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
#include "workspace.hpp"

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

using detail::WorkspaceCursor;

// The first `tokens` rows of a view.
TensorView rows(TensorView view, std::int64_t tokens) {
  view.shape[0] = tokens;
  return view;
}

struct Partial {
  TensorView out;  // [Nq, H, V]
  TensorView lse;  // [H, Nq]
};

// What the workspace must hold for one step.
struct StepExtent {
  std::int64_t num_q = 0;
  int heads = 0, p = 0, r = 0, v = 0, latent = 0;
  DType dtype = DType::bfloat16;
  std::int64_t rows = 1;   // latents, keys and values: the new tokens, then each chunk in turn
  std::int64_t slots = 0;  // cache slots of all chunks
  bool chunks = false;

  StepExtent(const BackendParams& params, std::int64_t new_tokens, int latent_dim, const ContextPlan& plan)
      : num_q(new_tokens),
        heads(params.num_heads),
        p(params.dims.qk_nope_head_dim),
        r(params.dims.qk_rope_head_dim),
        v(params.dims.v_head_dim),
        latent(latent_dim),
        dtype(params.dtype),
        chunks(!plan.chunks.empty()) {
    rows = std::max<std::int64_t>(num_q, 1);
    for (const ContextChunk& chunk : plan.chunks) {
      rows = std::max(rows, chunk.num_tokens());
      slots += chunk.num_tokens();
    }
  }
};

// The step's workspace, in order. Keys and values of the new tokens and of
// each chunk share rows: on a queue, each chunk's gather runs after the
// attention that read the previous rows. Over a measuring cursor it gives
// mla_prefill_workspace_size.
struct StepWorkspace {
  std::int64_t* slots = nullptr;
  TensorView latents, k, v;
  Partial prefix, first, second;  // with context chunks: a chunk's result and the running one's two buffers

  StepWorkspace(WorkspaceCursor& cursor, const StepExtent& e) {
    slots = static_cast<std::int64_t*>(cursor.bytes(static_cast<std::size_t>(e.slots) * sizeof(std::int64_t)));
    latents = cursor.view(DType::float32, {e.rows, e.latent});
    k = cursor.view(e.dtype, {e.rows, e.heads, e.p + e.r});
    v = cursor.view(e.dtype, {e.rows, e.heads, e.v});
    if (!e.chunks) return;
    for (Partial* partial : {&prefix, &first, &second}) {
      partial->out = cursor.view(e.dtype, {e.num_q, e.heads, e.v});
      partial->lse = cursor.view(DType::float32, {e.heads, e.num_q});
    }
  }
};

std::size_t workspace_bytes(const StepExtent& extent) {
  WorkspaceCursor measure = WorkspaceCursor::measuring();
  const StepWorkspace pieces(measure, extent);
  return measure.used();
}

// Gathers `gather` into the workspace's first rows and projects them through kv_b_proj.
void fill(PrefillBackend& backend, Queue& queue, const StepWorkspace& w, const LatentGather& gather,
          const TensorView& kv_b_proj, PhaseClock& clock) {
  const TensorView x = rows(w.latents, gather.tokens), keys = rows(w.k, gather.tokens);
  backend.gather_latents(queue, gather, x, keys);
  clock.done(&MlaStepPhases::gather_ms);
  backend.project_latents(queue, x, kv_b_proj, keys, rows(w.v, gather.tokens));
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

std::size_t mla_prefill_workspace_size(const BackendParams& params, const MlaStepMetadata& metadata, int kv_lora_rank,
                                       int block_size, std::int64_t workspace_tokens) {
  check_cu_seqlens(metadata.cu_seqlens_q, "cu_seqlens_q");
  if (kv_lora_rank < 1) {
    raise(ErrorCategory::invalid_argument,
          "mla_prefill_workspace_size: kv_lora_rank must be positive, got " + std::to_string(kv_lora_rank));
  }
  const ContextPlan plan = plan_context_chunks(metadata.context_lens, workspace_tokens, block_size);
  return workspace_bytes(StepExtent(params, metadata.cu_seqlens_q.back(), kv_lora_rank, plan));
}

void run_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepMetadata& metadata,
                     const MlaStepInputs& inputs, const MlaStepOutputs& outputs, std::int64_t workspace_tokens,
                     MlaStepPhases* phases) {
  const BackendParams& params = backend.params();
  const MlaStepShape s = detail::check_mla_step(params, metadata, inputs, outputs);
  const ContextPlan plan = plan_context_chunks(metadata.context_lens, workspace_tokens, s.block_size);
  const StepExtent extent(params, s.num_q, s.latent, plan);
  const std::size_t needed = workspace_bytes(extent);
  // The caller's workspace, or one of this call's on the queue. A queue's
  // free waits for the device (cudaFree / hipFree synchronise) or runs on the
  // host queue, where the work is done, so it may die at the end of the call.
  UsmBuffer own;
  void* base = outputs.workspace;
  std::size_t bytes = outputs.workspace_bytes;
  if (base == nullptr && bytes == 0) {
    own = UsmBuffer::device(queue, needed);
    base = own.get();
    bytes = needed;
  } else {
    detail::check_workspace("run_mla_prefill", "mla_prefill_workspace_size", base, bytes, needed);
  }
  WorkspaceCursor cursor(base, bytes, "run_mla_prefill");
  const StepWorkspace w(cursor, extent);

  PrefillMetadata step;
  step.cu_seqlens_q = metadata.cu_seqlens_q;
  step.cu_seqlens_k = metadata.cu_seqlens_q;
  step.max_seqlen_q = step.max_seqlen_k = max_seqlen(metadata.cu_seqlens_q);
  for (const ContextChunk& chunk : plan.chunks) step.chunks.push_back({chunk.cu_seqlens_k, chunk.max_seqlen_k});
  backend.prepare(queue, step);
  // The chunks' cache slots, uploaded before the clock starts (the copy reads
  // the host vector before it returns, as device metadata uploads rely on too).
  const std::vector<std::int64_t> slots = chunk_slots(metadata, s, plan);
  if (!slots.empty()) queue.memcpy(w.slots, slots.data(), slots.size() * sizeof(std::int64_t));

  PhaseClock clock(queue, phases);
  LatentGather fresh_rows;
  fresh_rows.kv_c = inputs.kv_c;
  fresh_rows.k_pe = inputs.k_pe;
  fresh_rows.tokens = s.num_q;
  fill(backend, queue, w, fresh_rows, inputs.kv_b_proj, clock);
  const TensorView k_new = rows(w.k, s.num_q);
  const TensorView v_new = rows(w.v, s.num_q);
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
  backend.run_new_tokens(queue, inputs.q, k_new, v_new, true, w.first.out, std::nullopt, w.first.lse);
  clock.done(&MlaStepPhases::attention_ms);
  const Partial* running = &w.first;
  const Partial* spare = &w.second;
  std::int64_t slot_offset = 0;
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    const std::int64_t tokens = plan.chunks[c].num_tokens();
    LatentGather cached;
    cached.cache = inputs.cache;
    cached.slots = w.slots + slot_offset;
    cached.tokens = tokens;
    cached.scale = inputs.cache.dtype == DType::float8_e4m3 ? inputs.cache_scale : 1.0f;
    slot_offset += tokens;
    fill(backend, queue, w, cached, inputs.kv_b_proj, clock);
    backend.run_context_chunk(queue, static_cast<int>(c), inputs.q, rows(w.k, tokens), rows(w.v, tokens), w.prefix.out,
                              w.prefix.lse);
    clock.done(&MlaStepPhases::attention_ms);
    const bool last = c + 1 == plan.chunks.size();
    MergeArgs merge;
    merge.prefix_out = w.prefix.out;
    merge.prefix_lse = w.prefix.lse;
    merge.suffix_out = running->out;
    merge.suffix_lse = running->lse;
    merge.out = last ? outputs.out : spare->out;
    merge.out_lse = last ? outputs.lse : spare->lse;
    backend.merge_attn_states(queue, merge);
    clock.done(&MlaStepPhases::merge_ms);
    std::swap(running, spare);
  }
  clock.finish();
}

}  // namespace mla
