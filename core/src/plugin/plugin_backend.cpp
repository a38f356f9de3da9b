// The adapter between mla::PrefillBackend and a plugin's C operations. The
// library does everything the C side should not have to: argument checks
// (the same ones every built-in backend runs), output allocation on the
// queue, and turning a failed call's status and message into mla::Error.
#include "plugin/plugin_backend.hpp"

#include <array>
#include <utility>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla::detail {
namespace {

// A NUL-terminated message buffer a C call may write into.
class Message {
 public:
  char* data() { return buffer_.data(); }
  std::size_t size() const { return buffer_.size(); }
  // What the call wrote, safe even if it forgot the terminator.
  std::string text() {
    buffer_.back() = '\0';
    std::string text(buffer_.data());
    return text.empty() ? "(the plugin gave no message)" : text;
  }

 private:
  std::array<char, 1024> buffer_{};
};

std::int32_t c_dtype(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return MLA_PLUGIN_FLOAT32;
    case DType::float16:
      return MLA_PLUGIN_FLOAT16;
    case DType::bfloat16:
      return MLA_PLUGIN_BFLOAT16;
    case DType::float8_e4m3:
      return MLA_PLUGIN_FLOAT8_E4M3;
  }
  raise(ErrorCategory::internal, "dtype without a plugin code");
}

std::int32_t c_memory(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::host:
      return MLA_PLUGIN_MEMORY_HOST;
    case MemoryKind::device:
      return MLA_PLUGIN_MEMORY_DEVICE;
    case MemoryKind::shared:
      return MLA_PLUGIN_MEMORY_SHARED;
  }
  raise(ErrorCategory::internal, "memory kind without a plugin code");
}

std::int32_t c_vendor(Vendor vendor) {
  switch (vendor) {
    case Vendor::nvidia:
      return MLA_PLUGIN_VENDOR_NVIDIA;
    case Vendor::amd:
      return MLA_PLUGIN_VENDOR_AMD;
    case Vendor::host:
      return MLA_PLUGIN_VENDOR_HOST;
  }
  raise(ErrorCategory::internal, "vendor without a plugin code");
}

mla_plugin_tensor c_tensor(const TensorView& view) {
  mla_plugin_tensor tensor{};
  if (view.empty_view()) return tensor;  // not requested: NULL, rank 0
  tensor.data = view.data;
  tensor.dtype = c_dtype(view.dtype);
  tensor.rank = view.rank;
  for (std::size_t i = 0; i < TensorView::max_rank; ++i) {
    const bool used = static_cast<int>(i) < view.rank;
    tensor.shape[i] = used ? view.shape[i] : 0;
    tensor.stride[i] = used ? view.stride[i] : 0;
  }
  tensor.memory = c_memory(view.memory);
  return tensor;
}

// The C ABI carries the fp8 scale as a number, 0 for none: a device scale is
// read back through the queue first (one wait on a GPU queue) and checked.
float c_scale(Queue& queue, const std::optional<OutputScale>& scale) {
  return scale ? read_out_scale(queue, *scale) : 0.0f;
}

mla_plugin_queue c_queue(const Queue& queue) {
  mla_plugin_queue c{};
  switch (queue.backend()) {
    case DeviceBackend::host:
      c.device = MLA_PLUGIN_DEVICE_HOST;
      break;
    case DeviceBackend::cuda:
      c.device = MLA_PLUGIN_DEVICE_CUDA;
      break;
    case DeviceBackend::hip:
      c.device = MLA_PLUGIN_DEVICE_HIP;
      break;
  }
  c.device_index = queue.device_index();
  c.native_stream = queue.native_stream();
  return c;
}

// PrefillMetadata as the C struct; the arrays point into `metadata`.
struct CMetadata {
  std::vector<mla_plugin_chunk> chunks;
  mla_plugin_metadata view{};

  explicit CMetadata(const PrefillMetadata& metadata) {
    for (const PrefillMetadata::Chunk& chunk : metadata.chunks) {
      chunks.push_back({chunk.cu_seqlens_k.data(), chunk.max_seqlen_k});
    }
    view.batch_size = metadata.batch_size();
    view.cu_seqlens_q = metadata.cu_seqlens_q.data();
    view.cu_seqlens_k = metadata.cu_seqlens_k.data();
    view.max_seqlen_q = metadata.max_seqlen_q;
    view.max_seqlen_k = metadata.max_seqlen_k;
    view.causal = metadata.causal ? 1 : 0;
    view.num_chunks = static_cast<std::int32_t>(chunks.size());
    view.chunks = chunks.empty() ? nullptr : chunks.data();
  }
};

mla_plugin_attention_args attention_args(const TensorView& q, const TensorView& k, const TensorView& v, float scale,
                                         const AttentionResult& result, const PrefillMetadata& metadata,
                                         const std::vector<std::int32_t>& cu_seqlens_k, int max_seqlen_k, bool causal) {
  mla_plugin_attention_args args{};
  args.q = c_tensor(q);
  args.k = c_tensor(k);
  args.v = c_tensor(v);
  args.scale = scale;
  args.out = c_tensor(result.out);
  args.lse = c_tensor(result.lse);
  args.batch_size = metadata.batch_size();
  args.cu_seqlens_q = metadata.cu_seqlens_q.data();
  args.cu_seqlens_k = cu_seqlens_k.data();
  args.max_seqlen_q = metadata.max_seqlen_q;
  args.max_seqlen_k = max_seqlen_k;
  args.causal = causal ? 1 : 0;
  return args;
}

class PluginBackend final : public PrefillBackend {
 public:
  PluginBackend(const BackendParams& params, std::shared_ptr<const PluginBackendSpec> spec)
      : PrefillBackend(params), spec_(std::move(spec)) {
    // The C ABI carries no descales, and a plugin lists input dtypes without fp8.
    if (params.dtype == DType::float8_e4m3) {
      raise(ErrorCategory::not_supported,
            spec_->name + ": plugins take no float8_e4m3 q, k and v (the plugin ABI has no descales)");
    }
    mla_plugin_params c{};
    c.num_heads = params.num_heads;
    c.kv_lora_rank = params.kv_lora_rank;
    c.dims = {params.dims.qk_nope_head_dim, params.dims.qk_rope_head_dim, params.dims.v_head_dim};
    c.dtype = c_dtype(params.dtype);
    Message message;
    const int status = spec_->ops.create(spec_->user_data, &c, &instance_, message.data(), message.size());
    if (status != 0 && instance_ != nullptr) {
      // A failed create that set an instance: freed here, as abi.h says (the
      // destructor does not run for a constructor that throws).
      spec_->ops.destroy(spec_->user_data, instance_);
      instance_ = nullptr;
    }
    check(status, "create", message);
  }

  ~PluginBackend() override { spec_->ops.destroy(spec_->user_data, instance_); }

  std::string name() const override { return spec_->name; }

  void merge_attn_states(Queue& queue, const MergeArgs& args) const override {
    check_merge_args(*this, queue, args);
    mla_plugin_merge_args c{};
    c.prefix_out = c_tensor(args.prefix_out);
    c.prefix_lse = c_tensor(args.prefix_lse);
    c.suffix_out = c_tensor(args.suffix_out);
    c.suffix_lse = c_tensor(args.suffix_lse);
    c.out = c_tensor(args.out);
    c.out_lse = c_tensor(args.out_lse);
    c.has_prefill_tokens_with_context = args.prefill_tokens_with_context ? 1 : 0;
    c.prefill_tokens_with_context = args.prefill_tokens_with_context.value_or(0);
    c.has_out_scale = args.out_scale ? 1 : 0;
    c.out_scale = c_scale(queue, args.out_scale);
    const mla_plugin_queue c_q = c_queue(queue);
    Message message;
    check(spec_->ops.merge_attn_states(instance_, &c_q, &c, message.data(), message.size()), "merge_attn_states",
          message);
  }

  bool supports_quant_output(QuantKey key) const override {
    if (spec_->ops.supports_quant_output == nullptr) {
      return key == QuantKey::fp8_e4m3_static_per_tensor && spec_->fp8_output;
    }
    std::int32_t code = 0;
    switch (key) {
      case QuantKey::fp8_e4m3_static_per_tensor:
        code = MLA_PLUGIN_QUANT_FP8_E4M3_STATIC_PER_TENSOR;
        break;
    }
    return spec_->ops.supports_quant_output(instance_, code) != 0;
  }

 protected:
  // The plugin ABI keeps a prepared step inside the plugin (abi.h): a plan
  // prepares it, so a refusal surfaces when the step is planned, and every
  // call prepares it again with its plan's lengths before it runs, so calls
  // of several plans may interleave. The plugin's instance is the only
  // state, and it is the plugin's.
  AttentionPlan make_plan(const Queue& queue, const PrefillMetadata& metadata,
                          const PlanOptions& options) const override {
    AttentionPlan plan = PrefillBackend::make_plan(queue, metadata, options);
    prepare_plugin(queue, metadata);
    return plan;
  }

  void attend(Queue& queue, const AttentionCall& call) const override {
    const PrefillMetadata& meta = *call.plan->lengths;  // plugins read the lengths on the host
    prepare_plugin(queue, meta);
    const mla_plugin_queue c_q = c_queue(queue);
    Message message;
    AttentionResult result;
    result.out = call.out;
    result.lse = call.lse;
    if (call.chunk < 0) {
      mla_plugin_attention_args args = attention_args(call.q, call.k, call.v, call.scale, result, meta,
                                                      meta.cu_seqlens_k, meta.max_seqlen_k, meta.causal);
      args.has_out_scale = call.out_scale ? 1 : 0;
      args.out_scale = c_scale(queue, call.out_scale);
      check(spec_->ops.run_new_tokens(instance_, &c_q, &args, message.data(), message.size()), "run_new_tokens",
            message);
      return;
    }
    const PrefillMetadata::Chunk& chunk = meta.chunks[static_cast<std::size_t>(call.chunk)];
    const mla_plugin_attention_args args = attention_args(call.q, call.k, call.v, call.scale, result, meta,
                                                          chunk.cu_seqlens_k, chunk.max_seqlen_k, /*causal=*/false);
    check(spec_->ops.run_context_chunk(instance_, &c_q, call.chunk, &args, message.data(), message.size()),
          "run_context_chunk", message);
  }

 private:
  void prepare_plugin(const Queue& queue, const PrefillMetadata& metadata) const {
    if (spec_->ops.prepare == nullptr) return;
    const CMetadata c(metadata);
    const mla_plugin_queue c_q = c_queue(queue);
    Message message;
    check(spec_->ops.prepare(instance_, &c_q, &c.view, message.data(), message.size()), "prepare", message);
  }

  void check(int status, const char* operation, Message& message) const {
    if (status == 0) return;
    raise(ErrorCategory::plugin, "Plugin '" + spec_->plugin_path + "', backend " + spec_->name + ": " + operation +
                                     " failed: " + message.text());
  }

  std::shared_ptr<const PluginBackendSpec> spec_;
  void* instance_ = nullptr;
};

// The loader puts the plugin's path in front of the message.
[[noreturn]] void bad_description(const std::string& what, const std::string& problem) {
  raise(ErrorCategory::plugin, what + ": " + problem);
}

}  // namespace

PluginBackendSpec make_plugin_spec(const mla_plugin_backend* backend, const std::string& plugin_path,
                                   const std::string& what) {
  if (backend == nullptr) bad_description(what, "no backend description (NULL)");
  PluginBackendSpec spec;
  spec.plugin_path = plugin_path;
  if (backend->name == nullptr || *backend->name == '\0') bad_description(what, "the backend has no name");
  spec.name = backend->name;
  const std::string label = "backend " + spec.name + ": ";

  if (backend->dtypes == nullptr || backend->num_dtypes == 0) bad_description(what, label + "lists no dtypes");
  for (std::size_t i = 0; i < backend->num_dtypes; ++i) {
    switch (backend->dtypes[i]) {
      case MLA_PLUGIN_FLOAT32:
        spec.dtypes.push_back(DType::float32);
        break;
      case MLA_PLUGIN_FLOAT16:
        spec.dtypes.push_back(DType::float16);
        break;
      case MLA_PLUGIN_BFLOAT16:
        spec.dtypes.push_back(DType::bfloat16);
        break;
      case MLA_PLUGIN_FLOAT8_E4M3:
        bad_description(what,
                        label +
                            "float8_e4m3 is an output type only; list the input dtypes (float32, float16, bfloat16) "
                            "and set fp8_output");
      default:
        bad_description(what, label + "unknown dtype code " + std::to_string(backend->dtypes[i]));
    }
  }

  if (backend->num_dims != 0 && backend->dims == nullptr)
    bad_description(what, label + "num_dims is set but dims is NULL");
  for (std::size_t i = 0; i < backend->num_dims; ++i) {
    const mla_plugin_dims& d = backend->dims[i];
    const MlaDims dims{d.qk_nope_head_dim, d.qk_rope_head_dim, d.v_head_dim};
    if (dims.qk_nope_head_dim < 0 || dims.qk_rope_head_dim < 0 || dims.qk_head_dim() < 1 || dims.v_head_dim < 1) {
      bad_description(what, label + "MLA dims must be positive; got " + to_string(dims));
    }
    spec.dims.push_back(dims);
  }

  const mla_plugin_backend_ops& ops = backend->ops;
  const std::pair<const char*, bool> required[] = {
      {"create", ops.create != nullptr},
      {"destroy", ops.destroy != nullptr},
      {"run_new_tokens", ops.run_new_tokens != nullptr},
      {"run_context_chunk", ops.run_context_chunk != nullptr},
      {"merge_attn_states", ops.merge_attn_states != nullptr},
  };
  for (const auto& [op, present] : required) {
    if (!present) bad_description(what, label + "the required operation " + op + " is NULL");
  }

  spec.fp8_output = backend->fp8_output != 0;
  spec.user_data = backend->user_data;
  spec.supports_capability = backend->supports_capability;
  spec.availability = backend->availability;
  spec.ops = ops;
  return spec;
}

BackendEntry make_plugin_entry(std::shared_ptr<const PluginBackendSpec> spec) {
  BackendDescription description;
  description.name = spec->name;
  description.dtypes = spec->dtypes;
  description.dims = spec->dims;
  description.fp8_output = spec->fp8_output;
  if (spec->supports_capability != nullptr) {
    description.supports_capability = [spec](const DeviceCapability& capability) {
      return spec->supports_capability(spec->user_data, c_vendor(capability.vendor), capability.major,
                                       capability.minor) != 0;
    };
  }
  if (spec->availability != nullptr) {
    description.availability = [spec]() {
      Message reason;
      if (spec->availability(spec->user_data, reason.data(), reason.size()) != 0) return Availability{};
      return Availability{false, reason.text()};
    };
  }
  BackendFactory factory = [spec](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return std::make_unique<PluginBackend>(params, spec);
  };
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::detail
