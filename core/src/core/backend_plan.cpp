// The planned half of PrefillBackend: plan, upload and the stateless calls
// (shared checks, then the backend's attend), and the prepared step, a
// convenience that holds one plan and its workspace.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "core/workspace.hpp"
#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

[[noreturn]] void bad_argument(const std::string& message) { raise(ErrorCategory::invalid_argument, message); }

std::string device_name(DeviceBackend kind, int index) {
  return std::string(device_backend_name(kind)) + " device " + std::to_string(index);
}

// The words of the flash backends' plans at the smallest query tile R: cu_q,
// then per phase its cu_k, two words per work item and two mask positions
// per sequence. A sequence of s queries has ceil(s / R) <= s / R + 1 items,
// so a batch has at most Nq / R + B: one bound for host and device metadata
// of the same step.
std::size_t words_bound(std::int64_t batch_size, std::int64_t num_q_tokens, std::size_t phases) {
  const auto batch = static_cast<std::size_t>(std::max<std::int64_t>(batch_size, 0));
  const auto tokens = static_cast<std::size_t>(std::max<std::int64_t>(num_q_tokens, 0));
  const std::size_t items = tokens / min_planned_query_tile_rows + batch;
  return (batch + 1) + phases * ((batch + 1) + 2 * items + 2 * batch);
}

std::size_t plan_bytes(std::size_t words, std::size_t scratch) { return plan_words_bytes(words) + scratch; }

}  // namespace

struct PrefillBackend::Prepared {
  AttentionPlan plan;
  UsmBuffer workspace;
  std::optional<Queue> queue;  // where the words were uploaded
  bool ran_on_other_stream = false;
};

std::size_t attention_workspace_size(const BackendParams& params, const PrefillMetadata& metadata,
                                     const PlanOptions& options) {
  const std::size_t scratch = options.split_keys ? attention_scratch_size(params, metadata.num_q_tokens()) : 0;
  return plan_bytes(words_bound(metadata.batch_size(), metadata.num_q_tokens(), 1 + metadata.chunks.size()), scratch);
}

std::size_t attention_workspace_size(const BackendParams& params, const DevicePrefillMetadata& metadata,
                                     const PlanOptions& options) {
  const std::size_t scratch = options.split_keys ? attention_scratch_size(params, metadata.num_q_tokens) : 0;
  return plan_bytes(words_bound(metadata.batch_size, metadata.num_q_tokens, 1 + metadata.chunks.size()), scratch);
}

void PrefillBackend::check_queue(const Queue& /*queue*/, const char* /*operation*/) const {}

AttentionPlan PrefillBackend::make_plan(const Queue& queue, const PrefillMetadata& metadata,
                                        const PlanOptions& /*options*/) const {
  AttentionPlan plan;
  plan.queue_kind = queue.backend();
  plan.device_index = queue.device_index();
  plan.batch_size = metadata.batch_size();
  plan.num_q_tokens = metadata.num_q_tokens();
  plan.num_k_tokens = metadata.num_k_tokens();
  for (const PrefillMetadata::Chunk& chunk : metadata.chunks) plan.chunk_k_tokens.push_back(chunk.cu_seqlens_k.back());
  plan.causal = metadata.causal;
  plan.lengths = metadata;
  return plan;
}

AttentionPlan PrefillBackend::make_device_plan(Queue& queue, const DevicePrefillMetadata& metadata,
                                               const PlanOptions& options) const {
  return make_plan(queue, read_device_metadata(queue, metadata), options);
}

AttentionPlan PrefillBackend::plan(const Queue& queue, const PrefillMetadata& metadata,
                                   const PlanOptions& options) const {
  check_queue(queue, "plan");
  check_metadata(metadata);
  AttentionPlan planned = make_plan(queue, metadata, options);
  planned.backend = name();
  planned.params = params_;
  return planned;
}

AttentionPlan PrefillBackend::plan(Queue& queue, const DevicePrefillMetadata& metadata,
                                   const PlanOptions& options) const {
  check_queue(queue, "plan");
  check_device_metadata(metadata);
  if (!queue.can_access(metadata.memory)) {
    bad_argument(name() + " plan: the cu_seqlens are in " + std::string(memory_kind_name(metadata.memory)) +
                 " memory, which the queue " + queue.describe() + " cannot access");
  }
  AttentionPlan planned = make_device_plan(queue, metadata, options);
  planned.backend = name();
  planned.params = params_;
  return planned;
}

void PrefillBackend::upload_plan(Queue& queue, const AttentionPlan& plan, const Workspace& workspace) const {
  detail::check_workspace(name() + " upload_plan", "AttentionPlan::workspace_bytes", workspace.data, workspace.bytes,
                          plan.workspace_bytes);
  if (plan.workspace_words.empty()) return;
  queue.memcpy(workspace.data, plan.workspace_words.data(), plan.workspace_words.size() * sizeof(std::int32_t));
}

AttentionResult PrefillBackend::run_call(Queue& queue, AttentionCall& call, bool chunk_call, bool return_lse,
                                         std::optional<TensorView> out, std::optional<TensorView> lse) const {
  const AttentionPlan& plan = *call.plan;
  const std::string backend_name = name();
  // The message prefix, built only when a check fails or needs it.
  const auto who = [&] { return backend_name + " " + call.operation; };
  if (plan.backend != backend_name || plan.params.num_heads != params_.num_heads ||
      !(plan.params.dims == params_.dims) || plan.params.dtype != params_.dtype ||
      plan.params.output_dtype() != params_.output_dtype()) {
    bad_argument(who() + ": the plan was made by " + (plan.backend.empty() ? std::string("no backend") : plan.backend) +
                 " for other parameters or another backend; plan the step with this backend");
  }
  if (plan.queue_kind != queue.backend() || plan.device_index != queue.device_index()) {
    bad_argument(who() + " on " + device_name(queue.backend(), queue.device_index()) + " but the plan is for " +
                 device_name(plan.queue_kind, plan.device_index));
  }
  if (plan.workspace_bytes > 0) {
    detail::check_workspace(who(), "AttentionPlan::workspace_bytes", call.workspace.data, call.workspace.bytes,
                            plan.workspace_bytes);
  }
  const std::optional<TensorView> given_out = out;
  const std::optional<TensorView> given_lse = lse;
  if (!chunk_call) {
    check_new_tokens_args(*this, plan, queue, call.q, call.k, call.v, call.scale, given_out, call.out_scale, given_lse,
                          call.descales);
  } else {
    check_chunk_args(*this, plan, queue, call.chunk, call.q, call.k, call.v, call.scale, given_out, given_lse,
                     call.descales);
  }
  check_attention_mask(*this, plan, queue, call.mask, given_out, given_lse, who().c_str());
  const DType out_dtype = call.out_scale ? DType::float8_e4m3 : params_.output_dtype();
  AttentionResult result = allocate_result(*this, queue, plan.num_q_tokens, return_lse, out, out_dtype, lse);
  call.out = result.out;
  call.lse = result.lse;
  attend(queue, call);
  return result;
}

AttentionResult PrefillBackend::run_new_tokens(Queue& queue, const AttentionPlan& plan, const Workspace& workspace,
                                               const TensorView& q, const TensorView& k, const TensorView& v,
                                               float scale, bool return_lse, std::optional<TensorView> out,
                                               std::optional<OutputScale> out_scale, std::optional<TensorView> lse,
                                               const std::optional<InputDescales>& descales,
                                               const AttentionMask& mask) const {
  check_queue(queue, "run_new_tokens");
  AttentionCall call;
  call.plan = &plan;
  call.workspace = workspace;
  call.q = q;
  call.k = k;
  call.v = v;
  call.scale = scale;
  call.out_scale = out_scale;
  call.descales = descales;
  call.mask = mask;
  call.operation = "run_new_tokens";
  return run_call(queue, call, /*chunk_call=*/false, return_lse, out, lse);
}

AttentionResult PrefillBackend::run_context_chunk(Queue& queue, const AttentionPlan& plan, const Workspace& workspace,
                                                  int chunk_index, const TensorView& q, const TensorView& k,
                                                  const TensorView& v, float scale, std::optional<TensorView> out,
                                                  std::optional<TensorView> lse,
                                                  const std::optional<InputDescales>& descales,
                                                  const AttentionMask& mask) const {
  check_queue(queue, "run_context_chunk");
  AttentionCall call;
  call.plan = &plan;
  call.workspace = workspace;
  call.chunk = chunk_index;
  call.q = q;
  call.k = k;
  call.v = v;
  call.scale = scale;
  call.descales = descales;
  call.mask = mask;
  call.operation = "run_context_chunk";
  return run_call(queue, call, /*chunk_call=*/true, /*return_lse=*/true, out, lse);
}

void PrefillBackend::hold(Queue& queue, AttentionPlan plan) {
  // The previous workspace may be overwritten in stream order only when
  // every kernel that read it ran on this queue's stream; otherwise it is
  // freed (a GPU free waits for the device) and a new one allocated.
  const bool same_stream = prepared_ && prepared_->queue && !prepared_->ran_on_other_stream &&
                           prepared_->queue->backend() == queue.backend() &&
                           prepared_->queue->device_index() == queue.device_index() &&
                           prepared_->queue->native_stream() == queue.native_stream();
  auto next = std::make_shared<Prepared>();
  if (same_stream && prepared_->workspace.bytes() >= plan.workspace_bytes) {
    next->workspace = std::move(prepared_->workspace);
  }
  prepared_.reset();
  if (plan.workspace_bytes > 0 && !next->workspace) next->workspace = UsmBuffer::device(queue, plan.workspace_bytes);
  upload_plan(queue, plan, Workspace{next->workspace.get(), next->workspace.bytes()});
  next->plan = std::move(plan);
  next->queue = queue;
  prepared_ = std::move(next);
}

void PrefillBackend::prepare(Queue& queue, const PrefillMetadata& metadata) {
  check_queue(queue, "prepare");
  hold(queue, plan(queue, metadata));
}

void PrefillBackend::prepare_device(Queue& queue, const DevicePrefillMetadata& metadata) {
  check_queue(queue, "prepare_device");
  hold(queue, plan(queue, metadata));
}

const AttentionPlan& PrefillBackend::prepared_plan() const {
  if (!prepared_) bad_argument(name() + ": prepare() must be called before running attention");
  return prepared_->plan;
}

const PrefillMetadata& PrefillBackend::metadata() const {
  const AttentionPlan& held = prepared_plan();
  if (!held.lengths) {
    bad_argument(name() + ": the step was prepared from device metadata, whose lengths this backend never read back");
  }
  return *held.lengths;
}

void PrefillBackend::order_after_upload(Queue& queue) {
  // Queues over one stream (copies, a borrowed stream wrapped twice, a queue
  // with the caller's allocator) are already ordered; otherwise the run
  // waits for the upload on the device, not on the host.
  Prepared& held = *prepared_;
  if (held.plan.workspace_words.empty() || !held.queue) return;
  if (held.queue->native_stream() == queue.native_stream()) return;
  queue.wait_for(held.queue->record());
  held.ran_on_other_stream = true;
}

AttentionResult PrefillBackend::run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k,
                                               const TensorView& v, float scale, bool return_lse,
                                               std::optional<TensorView> out, std::optional<OutputScale> out_scale,
                                               std::optional<TensorView> lse,
                                               const std::optional<InputDescales>& descales,
                                               const AttentionMask& mask) {
  // A wrong queue is named before a missing prepare(); with a plan held,
  // the planned call below checks the queue.
  if (!prepared_) check_queue(queue, "run_new_tokens");
  const AttentionPlan& held = prepared_plan();
  order_after_upload(queue);
  const Workspace workspace{prepared_->workspace.get(), prepared_->workspace.bytes()};
  return static_cast<const PrefillBackend&>(*this).run_new_tokens(queue, held, workspace, q, k, v, scale, return_lse,
                                                                  out, out_scale, lse, descales, mask);
}

AttentionResult PrefillBackend::run_context_chunk(Queue& queue, int chunk_index, const TensorView& q,
                                                  const TensorView& k, const TensorView& v, float scale,
                                                  std::optional<TensorView> out, std::optional<TensorView> lse,
                                                  const std::optional<InputDescales>& descales,
                                                  const AttentionMask& mask) {
  // A wrong queue is named before a missing prepare(); with a plan held,
  // the planned call below checks the queue.
  if (!prepared_) check_queue(queue, "run_context_chunk");
  const AttentionPlan& held = prepared_plan();
  order_after_upload(queue);
  const Workspace workspace{prepared_->workspace.get(), prepared_->workspace.bytes()};
  return static_cast<const PrefillBackend&>(*this).run_context_chunk(queue, held, workspace, chunk_index, q, k, v,
                                                                     scale, out, lse, descales, mask);
}

namespace {
struct WrappedPlan final : PlanDetail {
  AttentionPlan inner;
};
}  // namespace

AttentionPlan wrap_plan(AttentionPlan outer, AttentionPlan inner) {
  outer.workspace_bytes = inner.workspace_bytes;
  outer.workspace_words = inner.workspace_words;
  auto detail = std::make_shared<WrappedPlan>();
  detail->inner = std::move(inner);
  outer.detail = std::move(detail);
  return outer;
}

void run_wrapped(const PrefillBackend& inner, Queue& queue, const AttentionCall& call) {
  const auto* wrapped = dynamic_cast<const WrappedPlan*>(call.plan->detail.get());
  if (wrapped == nullptr) raise(ErrorCategory::internal, "run_wrapped: the plan was not made by wrap_plan");
  const AttentionPlan& plan = wrapped->inner;
  const std::optional<TensorView> lse = call.lse.empty_view() ? std::nullopt : std::optional<TensorView>(call.lse);
  if (call.chunk < 0) {
    inner.run_new_tokens(queue, plan, call.workspace, call.q, call.k, call.v, call.scale, lse.has_value(), call.out,
                         call.out_scale, lse, call.descales, call.mask);
  } else {
    inner.run_context_chunk(queue, plan, call.workspace, call.chunk, call.q, call.k, call.v, call.scale, call.out, lse,
                            call.descales, call.mask);
  }
}

}  // namespace mla
