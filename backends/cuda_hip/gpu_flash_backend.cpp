#include "gpu_flash_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "cuda_hip/flash_dims.hpp"
#include "cuda_hip/softmax.hpp"
#include "cuda_hip/split_kv.hpp"
#include "mla/backend/checks.hpp"
#include "mla/backend/latents.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"

namespace mla::gpu {
namespace {

// The chooser's answer for `device` (null: the kernel alone), or
// Error(not_supported) with its reason.
KernelChoice choose_or_raise(const FlashVendor& vendor, const BackendParams& params, const DeviceCapability* device) {
  KernelChoice choice = vendor.choose({params.dtype, params.dims, device});
  if (!choice.supported()) raise(ErrorCategory::not_supported, std::string(vendor.backend_name) + " " + choice.refusal);
  return choice;
}

// Both kernels read (and write) 16-byte chunks along the last dim, so every
// operand must be contiguous there and 16-byte aligned at the start of each
// row and head. Other strides are free.
void check_kernel_layout(const TensorView& view, const char* what, const std::string& backend_name) {
  if (view.numel() == 0) return;
  const auto element = static_cast<std::int64_t>(dtype_size(view.dtype));
  const auto misaligned = [&](std::int64_t elements) { return elements * element % 16 != 0; };
  if (view.stride[2] != 1) {
    raise(ErrorCategory::invalid_argument,
          std::string(what) + " must be contiguous in its last dim for " + backend_name + "; got " + view.describe());
  }
  const bool bad_pointer = reinterpret_cast<std::uintptr_t>(view.data) % 16 != 0;
  const bool bad_rows = view.shape[0] > 1 && misaligned(view.stride[0]);
  const bool bad_heads = view.shape[1] > 1 && misaligned(view.stride[1]);
  if (bad_pointer || bad_rows || bad_heads) {
    raise(ErrorCategory::invalid_argument,
          std::string(what) + " must start 16-byte aligned and have token and head strides that are multiples of " +
              "16 bytes for " + backend_name + "; got " + view.describe());
  }
}

// "CUDA_FLASH run_context_chunk 0: 12 work items, heaviest first (digest
// 0x3f2a...), 5 splits": what a launch runs, for the debug log and the tests
// that compare the schedules of two paths.
std::string describe_launch(const AttentionPlan& plan, const FlashPlan& flash, std::size_t index,
                            const char* operation) {
  const PlannedPhase& phase = flash.phases[index];
  std::string text = plan.backend;
  text += ' ';
  text += operation;
  if (index > 0) {
    text += ' ';
    text += std::to_string(index - 1);
  }
  text += ": ";
  if (phase.bound_cu_q != nullptr) {
    text += std::to_string(phase.num_work) + " blocks over the caller's cu_seqlens (no work list)";
  } else {
    std::uint64_t digest = 1469598103934665603ull;  // FNV-1a over the items, in launch order
    for (std::int32_t i = 0; i < 2 * phase.num_work; ++i) {
      digest = (digest ^ static_cast<std::uint32_t>(plan.workspace_words[phase.work + static_cast<std::size_t>(i)])) *
               1099511628211ull;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
    text += std::to_string(phase.num_work) + " work items, heaviest first (digest 0x" + hex + ")";
  }
  return text + ", " + std::to_string(phase.splits) + (phase.splits == 1 ? " split" : " splits");
}

// A descale as the kernel reads it: the host value, or the tensor's data
// with a head stride (0 for one value; the shared checks took its shape).
KernelDescale kernel_descale(const Descale& descale) {
  KernelDescale d;
  if (!descale.is_tensor()) {
    d.value = descale.value;
    return d;
  }
  const TensorView elements = descale.elements();
  d.values = static_cast<const float*>(elements.data);
  d.head_stride = elements.shape[0] == 1 ? 0 : elements.stride[0];
  return d;
}

}  // namespace

GpuFlashBackend::GpuFlashBackend(const BackendParams& params, const FlashVendor& vendor)
    : PrefillBackend(params),
      vendor_(vendor),
      projector_(vendor.make_projector != nullptr ? vendor.make_projector() : nullptr) {
  choose_or_raise(vendor, params, nullptr);
}

bool GpuFlashBackend::supports_quant_output(QuantKey key) const { return key == QuantKey::fp8_e4m3_static_per_tensor; }

void GpuFlashBackend::check_kernel_layouts(std::initializer_list<Operand> operands) const {
  for (const Operand& operand : operands) {
    if (operand.view != nullptr) check_kernel_layout(*operand.view, operand.name, vendor_.backend_name);
  }
}

void GpuFlashBackend::check_queue(const Queue& queue, const char* operation) const {
  require_queue_kind(vendor_.backend_name, operation, {vendor_.queue_backend}, queue);
}

AttentionPlan GpuFlashBackend::make_plan(const Queue& queue, const PrefillMetadata& metadata,
                                         const PlanOptions& options) const {
  auto flash = std::make_shared<FlashPlan>();
  flash->kernel = choose_or_raise(vendor_, params(), &queue.capability()).tile;
  AttentionPlan plan = PrefillBackend::make_plan(queue, metadata, options);  // the sizes and lengths
  plan.workspace_words = plan_phases(metadata, TileShape{flash->kernel.block_rows, flash->kernel.block_cols}, *flash);
  plan_splits(queue, plan, *flash, options);
  plan.detail = std::move(flash);
  return plan;
}

AttentionPlan GpuFlashBackend::make_device_plan(Queue& queue, const DevicePrefillMetadata& metadata,
                                                const PlanOptions& options) const {
  auto flash = std::make_shared<FlashPlan>();
  flash->kernel = choose_or_raise(vendor_, params(), &queue.capability()).tile;
  AttentionPlan plan;
  plan.queue_kind = queue.backend();
  plan.device_index = queue.device_index();
  plan.batch_size = metadata.batch_size;
  plan.num_q_tokens = metadata.num_q_tokens;
  plan.num_k_tokens = metadata.num_k_tokens;
  for (const DevicePrefillMetadata::Chunk& chunk : metadata.chunks) plan.chunk_k_tokens.push_back(chunk.num_k_tokens);
  plan.causal = metadata.causal;
  bind_phases(metadata, TileShape{flash->kernel.block_rows, flash->kernel.block_cols}, *flash);
  plan_splits(queue, plan, *flash, options);
  plan.detail = std::move(flash);
  return plan;
}

void GpuFlashBackend::plan_splits(const Queue& queue, AttentionPlan& plan, FlashPlan& flash,
                                  const PlanOptions& options) const {
  // The words first, then (when a phase splits) the partials.
  plan.workspace_bytes = plan.workspace_words.empty() ? 0 : plan_words_bytes(plan.workspace_words.size());
  flash.scratch_offset = plan.workspace_bytes;
  if (!vendor_.splits_keys || !options.split_keys || plan.num_q_tokens == 0) return;
  const std::size_t scratch_bytes = attention_scratch_size(params(), plan.num_q_tokens);
  // What every phase asks alike; the blocks and key tiles are the phase's.
  SplitRequest request;
  // The emulated backends run on the host queue, whose "multiprocessors"
  // are CPU threads: there only MLA_KV_SPLITS splits, so tests do not
  // depend on the machine.
  request.multiprocessors = queue.backend() == DeviceBackend::host ? 0 : queue.capability().multiprocessors;
  request.rows = plan.num_q_tokens * params().num_heads;
  request.v_head_dim = flash.kernel.head_dim_v;
  request.scratch_bytes = scratch_bytes;
  request.forced = forced_kv_splits(max_kv_splits);
  request.max_splits = max_kv_splits;
  bool any = false;
  for (std::size_t index = 0; index < flash.phases.size(); ++index) {
    PlannedPhase& phase = flash.phases[index];
    if (phase.num_work == 0) continue;
    request.blocks = static_cast<std::int64_t>(phase.num_work) * params().num_heads;
    request.key_tiles = ceil_div(phase.max_seqlen_k, flash.kernel.block_cols);
    const SplitChoice choice = choose_kv_splits(request);
    if (log_level() <= LogLevel::debug) {
      const std::string call = index == 0 ? "new tokens" : "context chunk " + std::to_string(index - 1);
      log(LogLevel::debug, std::string(vendor_.backend_name) + " " + call + ": " + choice.reason);
    }
    phase.splits = std::max(choice.splits, 1);
    any = any || phase.splits > 1;
  }
  if (any) plan.workspace_bytes += scratch_bytes;
}

void GpuFlashBackend::merge_attn_states(Queue& queue, const MergeArgs& args) const {
  check_queue(queue, "merge_attn_states");
  check_merge_args(*this, queue, args);
  // §12: NaN and +inf sinks are refused before anything is written, which
  // takes reading them back (a synchronising copy of H floats).
  read_sinks(queue, args.sinks, static_cast<int>(args.prefix_out.size(1)));
  vendor_.merge(queue, args);
}

DType GpuFlashBackend::latent_dtype(DType compute) const {
  return compute == DType::bfloat16 || compute == DType::float16 ? compute : DType::float32;
}

void GpuFlashBackend::gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                                     const TensorView& k) const {
  check_queue(queue, "gather_latents");
  check_latent_gather(queue, gather, latents, k, true);
  vendor_.gather(queue, gather, latents, k);
}

void GpuFlashBackend::project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                                      const TensorView& k, const TensorView& v) const {
  check_queue(queue, "project_latents");
  check_latent_projection(queue, latents, kv_b_proj, k, v, true);
  if (projector_) {
    projector_->project(queue, latents, kv_b_proj, k, v);
  } else {
    vendor_.project(queue, latents, kv_b_proj, k, v);
  }
}

Descale GpuFlashBackend::quantise_e4m3(Queue& queue, const TensorView& from, const TensorView& to,
                                       std::optional<float> scale, float* scratch) const {
  check_queue(queue, "quantise_e4m3");
  if (vendor_.quantise == nullptr) {
    raise(ErrorCategory::not_supported,
          std::string(vendor_.backend_name) + " quantise_e4m3: this build has no quantisation kernel");
  }
  vendor_.quantise(queue, from, to, scale, scratch);
  if (scale) return Descale(*scale);
  const MemoryKind memory = queue.backend() == DeviceBackend::host ? MemoryKind::host : MemoryKind::device;
  return Descale::of(TensorView::contiguous(scratch + 1, DType::float32, {1}, memory));
}

void GpuFlashBackend::attend(Queue& queue, const AttentionCall& call) const {
  const auto* flash = dynamic_cast<const FlashPlan*>(call.plan->detail.get());
  if (flash == nullptr) {
    raise(ErrorCategory::invalid_argument, std::string(vendor_.backend_name) + " " + call.operation +
                                               ": the plan holds no flash plan; plan the step with this backend");
  }
  const bool chunk = call.chunk >= 0;
  check_kernel_layouts({{"q", &call.q},
                        {chunk ? "chunk k" : "k", &call.k},
                        {chunk ? "chunk v" : "v", &call.v},
                        {chunk ? "chunk out" : "out", &call.out}});
  const std::size_t index = static_cast<std::size_t>(call.chunk + 1);
  const DevicePhase phase = flash->resolve(index, call.workspace.data);
  const TensorView& q = call.q;
  const TensorView& k = call.k;
  const TensorView& v = call.v;
  FlashParams p;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.out = call.out.data;
  p.lse = call.lse.empty_view() ? nullptr : static_cast<float*>(call.lse.data);
  p.q_row_stride = q.stride[0];
  p.q_head_stride = q.stride[1];
  p.k_row_stride = k.stride[0];
  p.k_head_stride = k.stride[1];
  p.v_row_stride = v.stride[0];
  p.v_head_stride = v.stride[1];
  p.out_row_stride = call.out.stride[0];
  p.out_head_stride = call.out.stride[1];
  if (p.lse != nullptr) {
    p.lse_head_stride = call.lse.stride[0];
    p.lse_token_stride = call.lse.stride[1];
  }
  p.q_tokens = q.shape[0];
  p.k_tokens = k.shape[0];
  p.cu_seqlens_q = phase.cu_seqlens_q;
  p.cu_seqlens_k = phase.cu_seqlens_k;
  p.work = phase.work;
  p.num_work = phase.num_work;
  p.tiles_per_seq = phase.tiles_per_seq;
  p.num_heads = params().num_heads;
  p.batch_size = static_cast<std::int32_t>(call.plan->batch_size);
  p.causal = phase.causal;
  p.scale_log2 = call.scale * numeric::log2e;
  p.out_fp8 = call.out_scale.has_value();
  p.out_scale = call.out_scale ? call.out_scale->value : 1.0f;
  p.out_scale_ptr = call.out_scale ? call.out_scale->device : nullptr;
  p.e4m3_inputs = params().dtype == DType::float8_e4m3;
  if (call.descales) {
    p.q_descale = kernel_descale(call.descales->q);
    p.k_descale = kernel_descale(call.descales->k);
    p.v_descale = kernel_descale(call.descales->v);
  }
  if (call.mask.masks_keys()) {
    if (phase.positions == nullptr) {
      raise(ErrorCategory::not_supported,
            std::string(vendor_.backend_name) + " " + call.operation +
                ": a top-k mask or window needs a plan made from host metadata (PrefillMetadata), whose words "
                "hold the positions; this plan was made from device metadata");
    }
    p.mask.words = call.mask.topk.words;
    p.mask.batch_stride = call.mask.topk.batch_stride;
    p.mask.row_stride = call.mask.topk.row_stride;
    p.mask.window = call.mask.window;
    p.mask.positions = phase.positions;
    p.mask.batch_size = p.batch_size;
  }
  if (!call.mask.sinks.empty_view()) {
    read_sinks(queue, call.mask.sinks, params().num_heads);  // NaN and +inf refused before any write
    p.mask.sinks = static_cast<const float*>(call.mask.sinks.data);
    p.mask.sinks_stride = call.mask.sinks.stride[0];
  }
  const int splits = flash->phases[index].splits;
  if (splits > 1) {
    const auto values = static_cast<std::size_t>(splits) * static_cast<std::size_t>(p.q_tokens * p.num_heads);
    auto* base = static_cast<unsigned char*>(call.workspace.data) + flash->scratch_offset;
    p.num_splits = splits;
    p.partial_lse = reinterpret_cast<float*>(base);
    p.partial_out = reinterpret_cast<float*>(base + (values * sizeof(float) + 15) / 16 * 16);
  }
  if (log_level() <= LogLevel::debug) log(LogLevel::debug, describe_launch(*call.plan, *flash, index, call.operation));
  // The kernel's type is the output's (the inputs' too, but for e4m3 inputs).
  vendor_.launch(queue, p, params().output_dtype(), flash->kernel);
}

}  // namespace mla::gpu
