#include "gpu_flash_backend.hpp"

#include <cstdint>
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

}  // namespace

GpuFlashBackend::GpuFlashBackend(const BackendParams& params, const FlashVendor& vendor)
    : PrefillBackend(params),
      vendor_(vendor),
      kernel_(choose_or_raise(vendor, params, nullptr).tile),
      projector_(vendor.make_projector != nullptr ? vendor.make_projector() : nullptr) {}

bool GpuFlashBackend::supports_quant_output(QuantKey key) const { return key == QuantKey::fp8_e4m3_static_per_tensor; }

void GpuFlashBackend::check_kernel_layouts(std::initializer_list<Operand> operands) const {
  for (const Operand& operand : operands) {
    if (operand.view != nullptr) check_kernel_layout(*operand.view, operand.name, vendor_.backend_name);
  }
}

KernelTile GpuFlashBackend::require_queue(const Queue& queue, const char* call, bool check_prepared_device) const {
  const std::string name = vendor_.backend_name;
  require_queue_kind(name, call, {vendor_.queue_backend}, queue);
  const KernelTile tile = choose_or_raise(vendor_, params(), &queue.capability()).tile;
  if (check_prepared_device && device_metadata_.uploaded() && device_metadata_.device_index() != queue.device_index()) {
    raise(ErrorCategory::invalid_argument, name + " " + call + " on device " + std::to_string(queue.device_index()) +
                                               " but prepare() uploaded the metadata to device " +
                                               std::to_string(device_metadata_.device_index()));
  }
  return tile;
}

void GpuFlashBackend::prepare(Queue& queue, const PrefillMetadata& metadata) {
  kernel_ = require_queue(queue, "prepare", false);
  PrefillBackend::prepare(queue, metadata);
  // The previous buffer may be overwritten in stream order only when every
  // kernel that read it ran on this queue's stream.
  const bool same_stream = prepared_queue_ && prepared_queue_->native_stream() == queue.native_stream();
  device_metadata_.upload(queue, metadata, gpu::TileShape{kernel_.block_rows, kernel_.block_cols},
                          same_stream && !ran_on_other_stream_);
  prepared_queue_ = queue;
  ran_on_other_stream_ = false;
}

void GpuFlashBackend::prepare_device(Queue& queue, const DevicePrefillMetadata& metadata) {
  kernel_ = require_queue(queue, "prepare_device", false);
  record_device_step(metadata);
  if (!queue.can_access(metadata.memory)) {
    raise(ErrorCategory::invalid_argument, std::string(vendor_.backend_name) +
                                               " prepare_device: the cu_seqlens are in " +
                                               std::string(memory_kind_name(metadata.memory)) +
                                               " memory, which the queue " + queue.describe() + " cannot access");
  }
  device_metadata_.bind(queue, metadata, gpu::TileShape{kernel_.block_rows, kernel_.block_cols});
  prepared_queue_ = queue;
  ran_on_other_stream_ = false;
}

AttentionResult GpuFlashBackend::run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k,
                                                const TensorView& v, float scale, bool return_lse,
                                                std::optional<TensorView> out, std::optional<OutputScale> out_scale,
                                                std::optional<TensorView> lse) {
  require_queue(queue, "run_new_tokens", true);
  check_new_tokens_args(*this, queue, q, k, v, scale, out, out_scale, lse);
  check_kernel_layouts({{"q", &q}, {"k", &k}, {"v", &v}, {"out", out ? &*out : nullptr}});
  const DType out_dtype = out_scale ? DType::float8_e4m3 : params().dtype;
  AttentionResult result = allocate_result(*this, queue, step_sizes().num_q_tokens, return_lse, out, out_dtype, lse);
  launch(queue, device_metadata_.new_tokens(), q, k, v, scale, result, out_scale, "new tokens");
  return result;
}

AttentionResult GpuFlashBackend::run_context_chunk(Queue& queue, int chunk_index, const TensorView& q,
                                                   const TensorView& k, const TensorView& v, float scale,
                                                   std::optional<TensorView> out, std::optional<TensorView> lse) {
  require_queue(queue, "run_context_chunk", true);
  check_chunk_args(*this, queue, chunk_index, q, k, v, scale, out, lse);
  check_kernel_layouts({{"q", &q}, {"chunk k", &k}, {"chunk v", &v}, {"chunk out", out ? &*out : nullptr}});
  AttentionResult result = allocate_result(*this, queue, step_sizes().num_q_tokens, true, out, params().dtype, lse);
  launch(queue, device_metadata_.chunk(chunk_index), q, k, v, scale, result, std::nullopt,
         "context chunk " + std::to_string(chunk_index));
  return result;
}

void GpuFlashBackend::merge_attn_states(Queue& queue, const MergeArgs& args) {
  require_queue(queue, "merge_attn_states", false);
  check_merge_args(*this, queue, args);
  vendor_.merge(queue, args);
}

DType GpuFlashBackend::latent_dtype(DType compute) const {
  return compute == DType::bfloat16 || compute == DType::float16 ? compute : DType::float32;
}

void GpuFlashBackend::gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                                     const TensorView& k) {
  require_queue(queue, "gather_latents", false);
  check_latent_gather(queue, gather, latents, k, true);
  vendor_.gather(queue, gather, latents, k);
}

void GpuFlashBackend::project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                                      const TensorView& k, const TensorView& v) {
  require_queue(queue, "project_latents", false);
  check_latent_projection(queue, latents, kv_b_proj, k, v, true);
  if (projector_) {
    projector_->project(queue, latents, kv_b_proj, k, v);
  } else {
    vendor_.project(queue, latents, kv_b_proj, k, v);
  }
}

void GpuFlashBackend::launch(Queue& queue, const gpu::DevicePhase& phase, const TensorView& q, const TensorView& k,
                             const TensorView& v, float scale, const AttentionResult& result,
                             std::optional<OutputScale> out_scale, const std::string& call) {
  // Queues over one stream (copies, a borrowed stream wrapped twice, a queue
  // with the caller's allocator) are already ordered.
  if (prepared_queue_ && prepared_queue_->native_stream() != queue.native_stream()) {
    // The upload is on another stream: order this launch after it on the
    // device, without waiting on the host (either stream may be the caller's).
    queue.wait_for(prepared_queue_->record());
    ran_on_other_stream_ = true;
  }
  FlashParams p;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.out = result.out.data;
  p.lse = result.lse.empty_view() ? nullptr : static_cast<float*>(result.lse.data);
  p.q_row_stride = q.stride[0];
  p.q_head_stride = q.stride[1];
  p.k_row_stride = k.stride[0];
  p.k_head_stride = k.stride[1];
  p.v_row_stride = v.stride[0];
  p.v_head_stride = v.stride[1];
  p.out_row_stride = result.out.stride[0];
  p.out_head_stride = result.out.stride[1];
  if (p.lse != nullptr) {
    p.lse_head_stride = result.lse.stride[0];
    p.lse_token_stride = result.lse.stride[1];
  }
  p.q_tokens = q.shape[0];
  p.k_tokens = k.shape[0];
  p.cu_seqlens_q = phase.cu_seqlens_q;
  p.cu_seqlens_k = phase.cu_seqlens_k;
  p.work = phase.work;
  p.num_work = phase.num_work;
  p.tiles_per_seq = phase.tiles_per_seq;
  p.num_heads = params().num_heads;
  p.causal = phase.causal;
  p.scale_log2 = scale * numeric::log2e;
  p.out_fp8 = out_scale.has_value();
  p.out_scale = out_scale ? out_scale->value : 1.0f;
  p.out_scale_ptr = out_scale ? out_scale->device : nullptr;
  split_keys(queue, p, phase, call);
  vendor_.launch(queue, p, params().dtype, kernel_);
}

void GpuFlashBackend::split_keys(const Queue& queue, FlashParams& p, const gpu::DevicePhase& phase,
                                 const std::string& call) const {
  if (!vendor_.splits_keys || p.num_work == 0 || p.q_tokens == 0) return;
  SplitRequest request;
  request.blocks = static_cast<std::int64_t>(p.num_work) * p.num_heads;
  request.key_tiles = ceil_div(phase.max_seqlen_k, kernel_.block_cols);
  // The emulated backends run on the host queue, whose "multiprocessors" are
  // CPU threads: there only MLA_KV_SPLITS splits, so tests do not depend on
  // the machine.
  request.multiprocessors = queue.backend() == DeviceBackend::host ? 0 : queue.capability().multiprocessors;
  request.rows = p.q_tokens * p.num_heads;
  request.v_head_dim = kernel_.head_dim_v;
  const Scratch scratch = attention_scratch();
  request.scratch_bytes = scratch.bytes;
  request.forced = forced_kv_splits(max_kv_splits);
  request.max_splits = max_kv_splits;
  const SplitChoice choice = choose_kv_splits(request);
  if (log_level() <= LogLevel::debug) {
    log(LogLevel::debug, std::string(vendor_.backend_name) + " " + call + ": " + choice.reason);
  }
  if (choice.splits < 2) return;
  const auto values = static_cast<std::size_t>(choice.splits) * static_cast<std::size_t>(request.rows);
  auto* base = static_cast<unsigned char*>(scratch.data);
  p.num_splits = choice.splits;
  p.partial_lse = reinterpret_cast<float*>(base);
  p.partial_out = reinterpret_cast<float*>(base + (values * sizeof(float) + 15) / 16 * 16);
}

}  // namespace mla::gpu
