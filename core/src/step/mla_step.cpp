// run_mla_prefill: the step's keys and values gathered and up-projected by
// the backend on its own queue (PrefillBackend::gather_latents and
// project_latents), attention and merges through the backend as well.
#include "mla/mla_step.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/overlap.hpp"
#include "core/workspace.hpp"
#include "mla/backend/checks.hpp"
#include "mla/backend/latents.hpp"
#include "mla/error.hpp"
#include "step/mla_step_check.hpp"

namespace mla {
namespace {

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

// How the step's attention is planned: split-KV when there is context.
PlanOptions attention_options(const MlaStepPlan& plan) {
  PlanOptions options;
  options.split_keys = !plan.context.chunks.empty();
  return options;
}

BackendParams plan_params(const MlaStepPlan& plan) {
  BackendParams params;
  params.num_heads = plan.num_heads;
  params.dims = plan.dims;
  params.dtype = plan.attention_dtype;
  if (plan.attention_dtype != plan.dtype) params.out_dtype = plan.dtype;
  params.kv_lora_rank = plan.kv_lora_rank;
  return params;
}

bool fp8_mode(const MlaStepPlan& plan) { return plan.attention_dtype == DType::float8_e4m3; }

// The step's workspace, in order. Keys and values of the new tokens and of
// each chunk share rows: on a queue, each chunk's gather runs after the
// attention that read the previous rows. Over a measuring cursor it gives
// the plan's workspace_bytes.
struct StepWorkspace {
  Workspace attention;            // the attention plan's: its words and split-KV partials
  std::int64_t* slots = nullptr;  // the plan's slots
  TensorView latents, k, v;
  TensorView k8, v8;              // the FP8 attention mode: k and v quantised
  float* scales = nullptr;        // and its scratch: 4 words per attention call (k's and v's two)
  Partial prefix, first, second;  // with context chunks: a chunk's result and the running one's two buffers

  StepWorkspace(WorkspaceCursor& cursor, const MlaStepPlan& plan) {
    const std::size_t attention_bytes =
        attention_workspace_size(plan_params(plan), plan.attention, attention_options(plan));
    attention = {cursor.bytes(attention_bytes), attention_bytes};
    slots = static_cast<std::int64_t*>(cursor.bytes(plan.slots.size() * sizeof(std::int64_t)));
    std::int64_t rows = std::max<std::int64_t>(plan.num_q_tokens, 1);
    for (const ContextChunk& chunk : plan.context.chunks) rows = std::max(rows, chunk.num_tokens());
    const std::int64_t heads = plan.num_heads, nq = plan.num_q_tokens;
    const MlaDims& d = plan.dims;
    latents = cursor.view(DType::float32, {rows, plan.kv_lora_rank});
    k = cursor.view(plan.dtype, {rows, heads, d.qk_head_dim()});
    v = cursor.view(plan.dtype, {rows, heads, d.v_head_dim});
    if (fp8_mode(plan)) {
      k8 = cursor.view(DType::float8_e4m3, {rows, heads, d.qk_head_dim()});
      v8 = cursor.view(DType::float8_e4m3, {rows, heads, d.v_head_dim});
      scales = static_cast<float*>(cursor.bytes(4 * sizeof(float) * (1 + plan.context.chunks.size())));
    }
    if (plan.context.chunks.empty()) return;
    for (Partial* partial : {&prefix, &first, &second}) {
      partial->out = cursor.view(plan.dtype, {nq, heads, d.v_head_dim});
      partial->lse = cursor.view(DType::float32, {heads, nq});
    }
  }
};

// Gathers `gather` into the workspace's first rows and projects them through
// kv_b_proj, the latents in the backend's latent_dtype: the workspace holds
// them as float32, the widest it may ask for, with the same element strides.
void fill(const PrefillBackend& backend, Queue& queue, const StepWorkspace& w, const LatentGather& gather,
          const TensorView& kv_b_proj, PhaseClock& clock) {
  TensorView x = rows(w.latents, gather.tokens);
  x.dtype = backend.latent_dtype(w.k.dtype);
  const TensorView keys = rows(w.k, gather.tokens);
  backend.gather_latents(queue, gather, x, keys);
  clock.done(&MlaStepPhases::gather_ms);
  backend.project_latents(queue, x, kv_b_proj, keys, rows(w.v, gather.tokens));
  clock.done(&MlaStepPhases::projection_ms);
}

// The value of a descale quantise_e4m3 returned, for MlaStepOutputs::kv_scales:
// a tensor's is copied back, after the queue's work so far.
float value_of(Queue& queue, const Descale& descale) {
  if (!descale.is_tensor()) return descale.value;
  float value = 0.0f;
  queue.memcpy(&value, descale.values.data, sizeof value);
  queue.wait();
  return value;
}

// The FP8 attention mode: the first `tokens` projected keys and values
// quantised into the fp8 rows by the backend on the queue, with the caller's
// static scales or, absent, amax / 448 of these rows (1 for all-zero rows).
// `call`: 0 for the new tokens, 1 + c for context chunk c (its scratch).
InputDescales quantise_rows(const PrefillBackend& backend, Queue& queue, const StepWorkspace& w, std::int64_t tokens,
                            std::size_t call, const MlaStepInputs& inputs, const MlaStepOutputs& outputs) {
  float* scratch = w.scales + 4 * call;
  const Descale k = backend.quantise_e4m3(queue, rows(w.k, tokens), rows(w.k8, tokens), inputs.k_scale, scratch);
  const Descale v = backend.quantise_e4m3(queue, rows(w.v, tokens), rows(w.v8, tokens), inputs.v_scale, scratch + 2);
  if (outputs.kv_scales != nullptr) outputs.kv_scales->push_back({value_of(queue, k), value_of(queue, v)});
  return {inputs.q_descale, k, v};
}

// The attention operands of `tokens` rows of the workspace: the projected
// keys and values, or in the FP8 attention mode their quantised copies and
// the descales of the call.
struct AttentionOperands {
  TensorView k, v;
  std::optional<InputDescales> descales;
};

AttentionOperands attention_operands(const PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan,
                                     const StepWorkspace& w, std::int64_t tokens, std::size_t call,
                                     const MlaStepInputs& inputs, const MlaStepOutputs& outputs) {
  if (!fp8_mode(plan)) return {rows(w.k, tokens), rows(w.v, tokens), std::nullopt};
  return {rows(w.k8, tokens), rows(w.v8, tokens), quantise_rows(backend, queue, w, tokens, call, inputs, outputs)};
}

// The cache slot of every context token of every chunk, chunk after chunk.
void plan_slots(const MlaStepMetadata& md, MlaStepPlan& plan) {
  plan.slots.clear();
  plan.slot_offsets.assign(1, 0);
  const auto columns = static_cast<std::size_t>(md.max_blocks);
  for (const ContextChunk& chunk : plan.context.chunks) {
    for (std::size_t b = 0; b + 1 < chunk.cu_seqlens_k.size(); ++b) {
      for (std::int32_t i = 0; i < chunk.length(b); ++i) {
        const std::int64_t position = std::int64_t{chunk.starts[b]} + i;
        const std::int64_t block = md.block_table[b * columns + static_cast<std::size_t>(position / plan.block_size)];
        plan.slots.push_back(block * plan.block_size + position % plan.block_size);
      }
    }
    plan.slot_offsets.push_back(static_cast<std::int64_t>(plan.slots.size()));
  }
}

void check_plan_params(const BackendParams& params, int block_size) {
  const auto bad = [](const std::string& message) {
    raise(ErrorCategory::invalid_argument, "plan_mla_prefill: " + message);
  };
  if (params.num_heads < 1) bad("num_heads must be at least 1, got " + std::to_string(params.num_heads));
  const MlaDims& d = params.dims;
  if (d.qk_nope_head_dim < 0 || d.qk_rope_head_dim < 0 || d.qk_head_dim() < 1 || d.v_head_dim < 1) {
    bad("MLA dims must be positive, got " + to_string(d));
  }
  if (params.kv_lora_rank < 1) bad("kv_lora_rank must be positive, got " + std::to_string(params.kv_lora_rank));
  if (params.dtype == DType::float8_e4m3 &&
      !(params.out_dtype && (*params.out_dtype == DType::float16 || *params.out_dtype == DType::bfloat16))) {
    bad("the FP8 attention mode (dtype float8_e4m3) needs out_dtype float16 or bfloat16, the dtype of its latents, "
        "projection and output; got " +
        (params.out_dtype ? std::string(dtype_name(*params.out_dtype)) : std::string("none")));
  }
  if (params.dtype != DType::float8_e4m3 && params.output_dtype() != params.dtype) {
    bad("out_dtype may differ from dtype only in the FP8 attention mode (dtype float8_e4m3)");
  }
  if (block_size < 1) bad("block_size must be at least 1, got " + std::to_string(block_size));
}

}  // namespace

MlaStepPlan plan_mla_prefill(const BackendParams& params, const MlaStepMetadata& metadata, int block_size,
                             const ContextPlan& chunks) {
  check_plan_params(params, block_size);
  MlaStepPlan plan;
  plan.num_heads = params.num_heads;
  plan.dims = params.dims;
  plan.dtype = params.output_dtype();
  plan.attention_dtype = params.dtype;
  plan.kv_lora_rank = params.kv_lora_rank;
  plan.block_size = block_size;
  plan.largest_block = detail::check_step_metadata(metadata, block_size);
  check_context_plan(chunks, metadata.context_lens);
  plan.batch_size = static_cast<int>(metadata.context_lens.size());
  plan.num_q_tokens = metadata.cu_seqlens_q.back();
  plan.context = chunks;

  PrefillMetadata& attention = plan.attention;
  attention.cu_seqlens_q = metadata.cu_seqlens_q;
  attention.cu_seqlens_k = metadata.cu_seqlens_q;
  attention.max_seqlen_q = attention.max_seqlen_k = max_seqlen(metadata.cu_seqlens_q);
  attention.causal = true;
  for (const ContextChunk& chunk : plan.context.chunks)
    attention.chunks.push_back({chunk.cu_seqlens_k, chunk.max_seqlen_k});
  plan_slots(metadata, plan);

  WorkspaceCursor measure = WorkspaceCursor::measuring();
  const StepWorkspace pieces(measure, plan);
  plan.workspace_bytes = measure.used();
  return plan;
}

MlaStepPlan plan_mla_prefill(const BackendParams& params, const MlaStepMetadata& metadata, int block_size,
                             std::int64_t workspace_tokens) {
  check_plan_params(params, block_size);
  return plan_mla_prefill(params, metadata, block_size,
                          plan_context_chunks(metadata.context_lens, workspace_tokens, block_size));
}

MlaStepPlan plan_mla_prefill(const PrefillBackend& backend, const Queue& queue, const MlaStepMetadata& metadata,
                             int block_size, const ContextPlan& chunks) {
  MlaStepPlan plan = plan_mla_prefill(backend.params(), metadata, block_size, chunks);
  plan.attention_plan = backend.plan(queue, plan.attention, attention_options(plan));
  return plan;
}

MlaStepPlan plan_mla_prefill(const PrefillBackend& backend, const Queue& queue, const MlaStepMetadata& metadata,
                             int block_size, std::int64_t workspace_tokens) {
  check_plan_params(backend.params(), block_size);
  return plan_mla_prefill(backend, queue, metadata, block_size,
                          plan_context_chunks(metadata.context_lens, workspace_tokens, block_size));
}

namespace {

// The step's attention plan: the one planned with the step, or one made now
// from its host lengths into `made`, so the flash backends keep their
// heaviest-first work lists and split decisions either way. A kept plan is
// used where it is, not copied.
const AttentionPlan& attention_plan(const PrefillBackend& backend, const Queue& queue, const MlaStepPlan& plan,
                                    const StepWorkspace& w, const char* who, std::optional<AttentionPlan>& made) {
  const AttentionPlan& attention = plan.attention_plan
                                       ? *plan.attention_plan
                                       : made.emplace(backend.plan(queue, plan.attention, attention_options(plan)));
  if (attention.workspace_bytes > w.attention.bytes) {
    raise(ErrorCategory::invalid_argument, std::string(who) + ": " + backend.name() + "'s attention plan needs " +
                                               std::to_string(attention.workspace_bytes) +
                                               " bytes, more than the step's plan counts (" +
                                               std::to_string(w.attention.bytes) + ")");
  }
  return attention;
}

// The attention plan's words and the gather lists go where the queue reads
// them (a host copy reads its source before it returns).
void upload(const PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan, const AttentionPlan& attention,
            const StepWorkspace& w) {
  backend.upload_plan(queue, attention, w.attention);
  if (!plan.slots.empty()) queue.memcpy(w.slots, plan.slots.data(), plan.slots.size() * sizeof(std::int64_t));
}

// §12's positions run over each sequence's context chunk after chunk: a
// step with a top-k mask or window needs its chunks in that order.
void require_ordered_chunks(const MlaStepPlan& plan) {
  std::vector<std::int64_t> before(static_cast<std::size_t>(plan.batch_size), 0);
  for (std::size_t c = 0; c < plan.context.chunks.size(); ++c) {
    const ContextChunk& chunk = plan.context.chunks[c];
    for (std::size_t b = 0; b < before.size(); ++b) {
      if (chunk.length(b) > 0 && chunk.starts[b] != before[b]) {
        raise(ErrorCategory::invalid_argument,
              "run_mla_prefill: a top-k mask or window needs the context chunks in order (docs/contract.md §12); "
              "chunk " +
                  std::to_string(c) + " of sequence " + std::to_string(b) + " starts at context token " +
                  std::to_string(chunk.starts[b]) + ", not after the " + std::to_string(before[b]) +
                  " tokens of the chunks before it");
      }
      before[b] += chunk.length(b);
    }
  }
}

// The step once its tensors have passed check_mla_step. `uploaded`:
// upload_mla_prefill already put the plan into the caller's workspace.
void run_checked(const PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan, const MlaStepInputs& inputs,
                 const MlaStepOutputs& outputs, const Workspace& workspace, float scale,
                 std::optional<OutputScale> out_scale, MlaStepPhases* phases, bool uploaded) {
  check_quant_output(backend, out_scale.has_value(), "output");
  // The caller's workspace, or one of this call's on the queue. A queue's
  // free waits for the device (cudaFree / hipFree synchronise) or runs on the
  // host queue, where the work is done, so it may die at the end of the call.
  UsmBuffer own;
  Workspace memory = workspace;
  if (memory.data == nullptr && memory.bytes == 0) {
    own = UsmBuffer::device(queue, plan.workspace_bytes);
    memory = {own.get(), plan.workspace_bytes};
  } else {
    detail::check_workspace("run_mla_prefill", "MlaStepPlan::workspace_bytes", memory.data, memory.bytes,
                            plan.workspace_bytes);
  }
  WorkspaceCursor cursor(memory.data, memory.bytes, "run_mla_prefill");
  const StepWorkspace w(cursor, plan);

  std::optional<AttentionPlan> made;
  const AttentionPlan& attention = attention_plan(backend, queue, plan, w, "run_mla_prefill", made);
  // §12: the mask checked, and the sinks read back (on a GPU queue a
  // synchronising copy of H floats), before anything is written. The
  // partial calls take it without its sinks; the last merge applies them.
  const AttentionMask& mask = inputs.mask;
  if (mask.masks_keys()) require_ordered_chunks(plan);
  check_attention_mask(backend, attention, queue, mask, outputs.out,
                       outputs.lse.empty_view() ? std::nullopt : std::optional<TensorView>(outputs.lse),
                       "run_mla_prefill");
  if (mask.has_sinks()) read_sinks(queue, mask.sinks, plan.num_heads);
  const AttentionMask partial_mask = mask.without_sinks();
  if (!uploaded) upload(backend, queue, plan, attention, w);

  PhaseClock clock(queue, phases);
  LatentGather fresh_rows;
  fresh_rows.kv_c = inputs.kv_c;
  fresh_rows.k_pe = inputs.k_pe;
  fresh_rows.tokens = plan.num_q_tokens;
  fill(backend, queue, w, fresh_rows, inputs.kv_b_proj, clock);
  if (outputs.kv_scales != nullptr) outputs.kv_scales->clear();
  const AttentionOperands fresh = attention_operands(backend, queue, plan, w, plan.num_q_tokens, 0, inputs, outputs);
  const bool want_lse = !outputs.lse.empty_view();
  if (plan.context.chunks.empty()) {
    backend.run_new_tokens(queue, attention, w.attention, inputs.q, fresh.k, fresh.v, scale, want_lse, outputs.out,
                           out_scale, want_lse ? std::optional<TensorView>(outputs.lse) : std::nullopt, fresh.descales,
                           mask);
    clock.done(&MlaStepPhases::attention_ms);
    clock.finish();
    return;
  }

  // The running result moves between two partials; the last merge writes
  // the caller's out and lse.
  backend.run_new_tokens(queue, attention, w.attention, inputs.q, fresh.k, fresh.v, scale, true, w.first.out,
                         std::nullopt, w.first.lse, fresh.descales, partial_mask);
  clock.done(&MlaStepPhases::attention_ms);
  const Partial* running = &w.first;
  const Partial* spare = &w.second;
  for (std::size_t c = 0; c < plan.num_chunks(); ++c) {
    const auto first_slot = static_cast<std::size_t>(plan.slot_offsets[c]);
    const std::int64_t tokens = plan.slot_offsets[c + 1] - plan.slot_offsets[c];
    LatentGather cached;
    cached.cache = inputs.cache;
    cached.slots = w.slots + first_slot;
    cached.tokens = tokens;
    cached.scale = inputs.cache.dtype == DType::float8_e4m3 ? inputs.cache_scale : 1.0f;
    cached.format = inputs.cache_format;
    fill(backend, queue, w, cached, inputs.kv_b_proj, clock);
    const AttentionOperands context = attention_operands(backend, queue, plan, w, tokens, c + 1, inputs, outputs);
    backend.run_context_chunk(queue, attention, w.attention, static_cast<int>(c), inputs.q, context.k, context.v, scale,
                              w.prefix.out, w.prefix.lse, context.descales, partial_mask);
    clock.done(&MlaStepPhases::attention_ms);
    const bool last = c + 1 == plan.num_chunks();
    MergeArgs merge;
    merge.prefix_out = w.prefix.out;
    merge.prefix_lse = w.prefix.lse;
    merge.suffix_out = running->out;
    merge.suffix_lse = running->lse;
    merge.out = last ? outputs.out : spare->out;
    merge.out_lse = last ? outputs.lse : spare->lse;
    if (last) {
      merge.out_scale = out_scale;
      merge.sinks = mask.sinks;
    }
    backend.merge_attn_states(queue, merge);
    clock.done(&MlaStepPhases::merge_ms);
    std::swap(running, spare);
  }
  clock.finish();
}

}  // namespace

void run_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan, const MlaStepInputs& inputs,
                     const MlaStepOutputs& outputs, const Workspace& workspace, float scale,
                     std::optional<OutputScale> out_scale, MlaStepPhases* phases) {
  detail::check_mla_step(plan, backend.params(), inputs, outputs, out_scale);
  detail::check_no_overlap(inputs, outputs, workspace);
  run_checked(backend, queue, plan, inputs, outputs, workspace, scale, out_scale, phases, false);
}

namespace {

void require_kept_plan(const MlaStepPlan& plan, const Workspace& workspace, const char* who) {
  if (!plan.attention_plan) {
    raise(ErrorCategory::invalid_argument, std::string(who) +
                                               ": the plan holds no attention plan; plan the step with the backend "
                                               "(plan_mla_prefill(backend, queue, ...))");
  }
  detail::check_workspace(who, "MlaStepPlan::workspace_bytes", workspace.data, workspace.bytes, plan.workspace_bytes);
}

}  // namespace

void upload_mla_prefill(const PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan,
                        const Workspace& workspace) {
  require_kept_plan(plan, workspace, "upload_mla_prefill");
  WorkspaceCursor cursor(workspace.data, workspace.bytes, "upload_mla_prefill");
  const StepWorkspace w(cursor, plan);
  std::optional<AttentionPlan> made;  // stays empty: the plan keeps its attention plan
  upload(backend, queue, plan, attention_plan(backend, queue, plan, w, "upload_mla_prefill", made), w);
}

void run_uploaded_mla_prefill(PrefillBackend& backend, Queue& queue, const MlaStepPlan& plan,
                              const MlaStepInputs& inputs, const MlaStepOutputs& outputs, const Workspace& workspace,
                              float scale, std::optional<OutputScale> out_scale) {
  require_kept_plan(plan, workspace, "run_uploaded_mla_prefill");
  detail::check_mla_step(plan, backend.params(), inputs, outputs, out_scale);
  detail::check_no_overlap(inputs, outputs, workspace);
  run_checked(backend, queue, plan, inputs, outputs, workspace, scale, out_scale, nullptr, true);
}

}  // namespace mla
