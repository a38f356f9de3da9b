// The non-virtual half of the backend interface: validation of descriptions
// (docs/contract.md §8) and the argument checks every backend shares, so that all
// backends reject the same bad input with the same message.
#include "mla/backend/checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <sstream>

#include "core/overlap.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

[[noreturn]] void bad_argument(const std::string& message) { raise(ErrorCategory::invalid_argument, message); }

bool contains(const std::vector<DType>& dtypes, DType dtype) {
  return std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

std::string dims_reason(const MlaDims& got, const std::vector<MlaDims>& supported) {
  std::ostringstream os;
  os << "Model does not have supported MLA dimensions (got " << to_string(got) << "; supported: ";
  for (std::size_t i = 0; i < supported.size(); ++i) os << (i ? ", " : "") << to_string(supported[i]);
  os << ")";
  return os.str();
}

// Rank, dtype, data pointer and the three dims of a [tokens, heads, dim]
// operand, each with its own message. `tokens_source` says where the expected
// token count comes from, e.g. "cu_seqlens_q".
struct OperandSpec {
  const char* what;
  std::optional<DType> dtype;  // nullopt: checked by the caller (outputs may be fp8)
  const char* dtype_source;    // "the backend's dtype", "prefix_out"
  std::int64_t tokens;
  const char* tokens_source;
  std::int64_t heads;
  std::int64_t dim;
  const char* dim_name;  // "qk_head_dim", "v_head_dim"
};

void check_operand(const TensorView& view, const OperandSpec& spec) {
  const std::string what = spec.what;
  if (view.empty_view()) bad_argument(what + " is missing (empty view)");
  if (view.rank != 3)
    bad_argument(what + " must have rank 3 [tokens, heads, " + spec.dim_name + "]; got " + view.describe());
  if (spec.dtype && view.dtype != *spec.dtype) {
    bad_argument(what + " has dtype " + std::string(dtype_name(view.dtype)) + " but " + spec.dtype_source + " is " +
                 std::string(dtype_name(*spec.dtype)));
  }
  if (view.size(0) != spec.tokens) {
    bad_argument(what + " has " + std::to_string(view.size(0)) + " tokens but " + spec.tokens_source + " needs " +
                 std::to_string(spec.tokens) + " (" + view.describe() + ")");
  }
  if (view.size(1) != spec.heads) {
    bad_argument(what + " has " + std::to_string(view.size(1)) + " heads but " + std::to_string(spec.heads) +
                 " are expected (" + view.describe() + ")");
  }
  if (view.size(2) != spec.dim) {
    bad_argument(what + " has head dim " + std::to_string(view.size(2)) + " but " + spec.dim_name + " is " +
                 std::to_string(spec.dim) + " (" + view.describe() + ")");
  }
  check_has_data(view, spec.what);
}

// lse [H, N] float32.
void check_lse(const TensorView& view, const char* what, std::int64_t heads, std::int64_t tokens) {
  const std::string name = what;
  if (view.rank != 2 || view.dtype != DType::float32 || view.size(0) != heads || view.size(1) != tokens) {
    bad_argument(name + " must be float32[" + std::to_string(heads) + ", " + std::to_string(tokens) +
                 "] (heads, tokens); got " + (view.empty_view() ? std::string("an empty view") : view.describe()));
  }
  check_has_data(view, what);
}

void check_out_scale(const OutputScale& out_scale) {
  if (out_scale.is_device()) return;  // read by the kernel; nothing to check here
  const float scale = out_scale.value;
  if (!std::isfinite(scale) || scale <= 0.0f)
    bad_argument("out_scale must be a finite positive number; got " + std::to_string(scale));
}

// The dtype an attention output must have: the backend's dtype, or fp8 when
// the caller asks for quantised output.
void check_out_dtype(const TensorView& out, DType input_dtype, const std::optional<OutputScale>& out_scale) {
  if (out_scale) {
    check_out_scale(*out_scale);
    if (out.dtype != DType::float8_e4m3) {
      bad_argument("out_scale is given, so out must be float8_e4m3; out is " + std::string(dtype_name(out.dtype)));
    }
  } else if (out.dtype != input_dtype) {
    bad_argument("out has dtype " + std::string(dtype_name(out.dtype)) + " but must be " +
                 std::string(dtype_name(input_dtype)) +
                 (out.dtype == DType::float8_e4m3 ? " (a float8_e4m3 out needs out_scale)" : ""));
  }
}

// One descale of float8_e4m3 inputs: a finite positive host value, or
// float32 [], [1] or [heads] (the values are read by the kernels).
void check_descale(const Descale& descale, const char* what, std::int64_t heads) {
  const std::string name = std::string(what) + " descale";
  if (!descale.is_tensor()) {
    if (!std::isfinite(descale.value) || descale.value <= 0.0f)
      bad_argument(name + " must be a finite positive number; got " + std::to_string(descale.value));
    return;
  }
  const TensorView& t = descale.values;
  const bool shape_ok = t.rank == 0 || (t.rank == 1 && (t.size(0) == 1 || t.size(0) == heads));
  if (t.dtype != DType::float32 || !shape_ok) {
    bad_argument(name + " must be float32 of shape [], [1] or [" + std::to_string(heads) + "] (one per head); got " +
                 t.describe());
  }
  check_has_data(t, name.c_str());
}

// Descales come with float8_e4m3 inputs only.
void check_descales(const BackendParams& params, const std::optional<InputDescales>& descales) {
  if (!descales) return;
  if (params.dtype != DType::float8_e4m3) {
    bad_argument("descales are for float8_e4m3 q, k and v; the backend's dtype is " +
                 std::string(dtype_name(params.dtype)));
  }
  check_descale(descales->q, "q", params.num_heads);
  check_descale(descales->k, "k", params.num_heads);
  check_descale(descales->v, "v", params.num_heads);
}

void check_descales_accessible(const Queue& queue, const std::optional<InputDescales>& descales) {
  if (!descales) return;
  check_accessible(queue, descales->q.elements(), "q descale");
  check_accessible(queue, descales->k.elements(), "k descale");
  check_accessible(queue, descales->v.elements(), "v descale");
}

void check_softmax_scale(float scale) {
  if (!std::isfinite(scale)) bad_argument("scale must be finite; got " + std::to_string(scale));
}

// check_accessible over a call's operands, in order; an operand the caller
// did not pass (null) is skipped.
struct NamedView {
  const char* name;
  const TensorView* view;
};
void check_all_accessible(const Queue& queue, std::initializer_list<NamedView> operands) {
  for (const NamedView& operand : operands) {
    if (operand.view != nullptr) check_accessible(queue, *operand.view, operand.name);
  }
}

const TensorView* given(const std::optional<TensorView>& view) { return view ? &*view : nullptr; }

std::size_t allocation_bytes(std::int64_t elements, DType dtype) {
  return static_cast<std::size_t>(elements) * dtype_size(dtype);
}

}  // namespace

void check_sinks(const TensorView& sinks, std::int64_t heads, const std::string& who) {
  if (sinks.rank != 1 || sinks.dtype != DType::float32 || sinks.size(0) != heads) {
    bad_argument(who + ": sinks must be float32[" + std::to_string(heads) + "] (one logit per head); got " +
                 sinks.describe());
  }
  check_has_data(sinks, (who + ": sinks").c_str());
}

void check_has_data(const TensorView& view, const char* what) {
  if (view.data == nullptr && view.numel() > 0) bad_argument(std::string(what) + " has no data: " + view.describe());
  for (int i = 0; i < view.rank; ++i) {
    if (view.stride[static_cast<std::size_t>(i)] < 0)
      bad_argument(std::string(what) + " has a negative stride: " + view.describe());
  }
}

std::string to_string(const SelectorConfig& config) {
  return "dtype=" + std::string(dtype_name(config.dtype)) + ", dims=" + to_string(config.dims);
}

std::vector<std::string> validate(const BackendDescription& description, const DeviceCapability& capability,
                                  const SelectorConfig& config) {
  std::vector<std::string> reasons;
  const bool capability_ok = !description.supports_capability || description.supports_capability(capability);
  if (!capability_ok) reasons.push_back("compute capability " + capability.capability_string() + " not supported");
  if (!contains(description.dtypes, config.dtype)) {
    reasons.push_back("dtype " + std::string(dtype_name(config.dtype)) + " not supported");
  } else if (capability_ok && description.dtype_refusal) {
    std::string refusal = description.dtype_refusal(config.dtype, capability);
    if (!refusal.empty()) reasons.push_back("dtype " + std::string(dtype_name(config.dtype)) + ": " + refusal);
  }
  Availability availability = description.availability ? description.availability() : Availability{};
  // Device code is only worth asking about on a device the backend supports in a build that has it.
  if (availability.available && capability_ok && description.device_availability)
    availability = description.device_availability(capability);
  if (!availability.available) {
    std::string reason = "required dependencies not available";
    if (!availability.reason.empty()) reason += " (" + availability.reason + ")";
    reasons.push_back(std::move(reason));
  }
  if (!description.dims.empty() &&
      std::find(description.dims.begin(), description.dims.end(), config.dims) == description.dims.end())
    reasons.push_back(dims_reason(config.dims, description.dims));
  if (description.requires_equal_qk_v && config.dims.qk_head_dim() != config.dims.v_head_dim) {
    reasons.push_back("Model does not have equal query/key and value head dims (got " + to_string(config.dims) +
                      "; qk_nope_head_dim + qk_rope_head_dim must equal v_head_dim)");
  }
  if (reasons.empty() && description.kernel_refusal) {
    std::string refusal = description.kernel_refusal(config, capability);
    if (!refusal.empty()) reasons.push_back(description.name + " " + refusal);
  }
  return reasons;
}

float read_out_scale(Queue& queue, const OutputScale& scale) {
  if (!scale.is_device()) return scale.value;
  float value = 0.0f;
  queue.memcpy(&value, scale.device, sizeof value);
  queue.wait();
  if (!(std::isfinite(value) && value > 0.0f)) {
    bad_argument("out_scale must be a finite positive number; the device scale holds " + std::to_string(value));
  }
  return value;
}

void check_accessible(const Queue& queue, const TensorView& view, const char* what) {
  if (view.empty_view() || view.numel() == 0) return;
  if (!queue.can_access(view.memory)) {
    bad_argument(std::string(what) + " is in " + std::string(memory_kind_name(view.memory)) +
                 " memory, which the queue " + queue.describe() + " cannot access");
  }
}

void check_merge_args(const MergeArgs& args) {
  const TensorView& prefix = args.prefix_out;
  if (prefix.empty_view()) bad_argument("merge: prefix_out is missing (empty view)");
  if (prefix.rank != 3)
    bad_argument("merge: prefix_out must have rank 3 [tokens, heads, v_head_dim]; got " + prefix.describe());
  if (prefix.dtype == DType::float8_e4m3) bad_argument("merge: prefix_out must not be float8_e4m3");
  const std::int64_t tokens = prefix.size(0);
  const std::int64_t heads = prefix.size(1);
  const std::int64_t head_dim = prefix.size(2);
  check_has_data(prefix, "merge: prefix_out");
  check_operand(args.suffix_out,
                {"merge: suffix_out", prefix.dtype, "prefix_out", tokens, "prefix_out", heads, head_dim, "v_head_dim"});
  check_lse(args.prefix_lse, "merge: prefix_lse", heads, tokens);
  check_lse(args.suffix_lse, "merge: suffix_lse", heads, tokens);
  if (args.out.empty_view()) bad_argument("merge: out is missing (empty view)");
  check_operand(args.out, {"merge: out", std::nullopt, "", tokens, "prefix_out", heads, head_dim, "v_head_dim"});
  check_out_dtype(args.out, prefix.dtype, args.out_scale);
  if (!args.out_lse.empty_view()) check_lse(args.out_lse, "merge: out_lse", heads, tokens);
  if (args.prefill_tokens_with_context) {
    const std::int64_t t = *args.prefill_tokens_with_context;
    if (t < 0 || t > tokens) {
      bad_argument("merge: prefill_tokens_with_context must be in [0, " + std::to_string(tokens) + "]; got " +
                   std::to_string(t));
    }
  }
  if (!args.sinks.empty_view()) check_sinks(args.sinks, heads, "merge");
  detail::check_no_overlap("merge", {{"out", args.out}, {"out_lse", args.out_lse}},
                           {{"prefix_out", prefix},
                            {"prefix_lse", args.prefix_lse},
                            {"suffix_out", args.suffix_out},
                            {"suffix_lse", args.suffix_lse},
                            {"sinks", args.sinks}});
}

void check_merge_args(const Queue& queue, const MergeArgs& args) {
  check_merge_args(args);
  check_all_accessible(queue, {{"merge: prefix_out", &args.prefix_out},
                               {"merge: prefix_lse", &args.prefix_lse},
                               {"merge: suffix_out", &args.suffix_out},
                               {"merge: suffix_lse", &args.suffix_lse},
                               {"merge: out", &args.out},
                               {"merge: out_lse", &args.out_lse},
                               {"merge: sinks", &args.sinks}});
}

void check_quant_output(const PrefillBackend& backend, bool has_out_scale, const char* output) {
  if (has_out_scale && !backend.supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor)) {
    raise(ErrorCategory::not_supported,
          backend.name() + " cannot write float8_e4m3 " + output + " (out_scale was given)");
  }
}

void check_merge_args(const PrefillBackend& backend, const Queue& queue, const MergeArgs& args) {
  check_quant_output(backend, args.out_scale.has_value(), "merge output");
  if (!args.sinks.empty_view() && !backend.takes_attention_masks()) {
    raise(ErrorCategory::not_supported, backend.name() +
                                            " merge_attn_states takes no sinks yet (docs/contract.md §12); "
                                            "every built-in backend does");
  }
  check_merge_args(queue, args);
}

PrefillBackend::PrefillBackend(const BackendParams& params) : params_(params) {
  if (params.num_heads < 1) bad_argument("num_heads must be at least 1; got " + std::to_string(params.num_heads));
  const MlaDims& d = params.dims;
  if (d.qk_nope_head_dim < 0 || d.qk_rope_head_dim < 0 || d.qk_head_dim() < 1 || d.v_head_dim < 1)
    bad_argument("MLA dims must be positive; got " + to_string(d));
  if (params.kv_lora_rank < 0)
    bad_argument("kv_lora_rank must not be negative; got " + std::to_string(params.kv_lora_rank));
  if (params.dtype == DType::float8_e4m3) {
    const bool out_ok =
        params.out_dtype && (*params.out_dtype == DType::float16 || *params.out_dtype == DType::bfloat16);
    if (!out_ok) {
      bad_argument("float8_e4m3 q, k and v need out_dtype float16 or bfloat16 for the output; got " +
                   (params.out_dtype ? std::string(dtype_name(*params.out_dtype)) : std::string("none")));
    }
  } else if (params.out_dtype && *params.out_dtype != params.dtype) {
    bad_argument("out_dtype may differ from dtype only for float8_e4m3 inputs; got dtype " +
                 std::string(dtype_name(params.dtype)) + " and out_dtype " +
                 std::string(dtype_name(*params.out_dtype)));
  }
}

std::vector<float> read_descales(Queue& queue, const Descale& descale, int heads, const char* what) {
  std::vector<float> values(static_cast<std::size_t>(heads), descale.value);
  if (descale.is_tensor()) {
    const TensorView t = descale.elements();
    const bool per_head = t.size(0) == heads && heads > 1;
    const std::int64_t stride = per_head ? t.stride[0] : 0;
    for (int h = 0; h < (per_head ? heads : 1); ++h) {
      const auto* at = static_cast<const float*>(t.data) + h * stride;
      queue.memcpy(&values[static_cast<std::size_t>(h)], at, sizeof(float));
    }
    queue.wait();
    if (!per_head) std::fill(values.begin() + 1, values.end(), values[0]);
  }
  for (std::size_t h = 0; h < values.size(); ++h) {
    if (!(std::isfinite(values[h]) && values[h] > 0.0f)) {
      bad_argument(std::string(what) + " descale must be finite and positive; head " + std::to_string(h) + " has " +
                   std::to_string(values[h]));
    }
  }
  return values;
}

std::size_t attention_scratch_size(const BackendParams& params, std::int64_t num_q_tokens) {
  const std::int64_t rows = std::max<std::int64_t>(num_q_tokens, 0) * params.num_heads;
  if (rows == 0) return 0;
  const std::int64_t split_rows = std::min<std::int64_t>(rows * max_kv_splits, kv_split_row_budget);
  return static_cast<std::size_t>(split_rows) * static_cast<std::size_t>(params.dims.v_head_dim + 1) * sizeof(float) +
         256;
}

bool PrefillBackend::supports_quant_output(QuantKey /*key*/) const { return false; }

namespace {

void check_new_tokens_shapes(const PrefillBackend& backend, const AttentionPlan& meta, const TensorView& q,
                             const TensorView& k, const TensorView& v, float scale,
                             const std::optional<TensorView>& out, const std::optional<OutputScale>& out_scale,
                             const std::optional<TensorView>& lse, const std::optional<InputDescales>& descales) {
  const BackendParams& params = backend.params();
  check_softmax_scale(scale);
  const std::int64_t heads = params.num_heads;
  const std::int64_t dqk = params.dims.qk_head_dim();
  const std::int64_t dv = params.dims.v_head_dim;
  const char* dtype_source = "the backend's dtype";
  check_operand(q, {"q", params.dtype, dtype_source, meta.num_q_tokens, "cu_seqlens_q", heads, dqk, "qk_head_dim"});
  check_operand(k, {"k", params.dtype, dtype_source, meta.num_k_tokens, "cu_seqlens_k", heads, dqk, "qk_head_dim"});
  check_operand(v, {"v", params.dtype, dtype_source, meta.num_k_tokens, "cu_seqlens_k", heads, dv, "v_head_dim"});
  check_descales(params, descales);
  check_quant_output(backend, out_scale.has_value(), "output");
  if (out_scale) check_out_scale(*out_scale);
  if (out) {
    check_operand(*out, {"out", std::nullopt, "", meta.num_q_tokens, "cu_seqlens_q", heads, dv, "v_head_dim"});
    check_out_dtype(*out, params.output_dtype(), out_scale);
  }
  if (lse) check_lse(*lse, "lse", heads, meta.num_q_tokens);
  std::vector<detail::Operand> inputs{{"q", q}, {"k", k}, {"v", v}};
  detail::add_descale_operands(inputs, descales);
  detail::check_no_overlap("", {{"out", out}, {"lse", lse}}, inputs);
}

}  // namespace

void check_new_tokens_args(const PrefillBackend& backend, const AttentionPlan& plan, const Queue& queue,
                           const TensorView& q, const TensorView& k, const TensorView& v, float scale,
                           const std::optional<TensorView>& out, const std::optional<OutputScale>& out_scale,
                           const std::optional<TensorView>& lse, const std::optional<InputDescales>& descales) {
  check_new_tokens_shapes(backend, plan, q, k, v, scale, out, out_scale, lse, descales);
  check_all_accessible(queue, {{"q", &q}, {"k", &k}, {"v", &v}, {"out", given(out)}, {"lse", given(lse)}});
  check_descales_accessible(queue, descales);
}

namespace {

void check_chunk_shapes(const PrefillBackend& backend, const AttentionPlan& meta, int chunk_index, const TensorView& q,
                        const TensorView& k, const TensorView& v, float scale, const std::optional<TensorView>& out,
                        const std::optional<TensorView>& lse, const std::optional<InputDescales>& descales) {
  const BackendParams& params = backend.params();
  check_softmax_scale(scale);
  if (chunk_index < 0 || static_cast<std::size_t>(chunk_index) >= meta.chunk_k_tokens.size()) {
    bad_argument("chunk_index " + std::to_string(chunk_index) + " is out of range: the metadata has " +
                 std::to_string(meta.chunk_k_tokens.size()) + " context chunks");
  }
  const std::int64_t chunk_tokens = meta.chunk_k_tokens[static_cast<std::size_t>(chunk_index)];
  const std::int64_t heads = params.num_heads;
  const std::int64_t dqk = params.dims.qk_head_dim();
  const std::int64_t dv = params.dims.v_head_dim;
  const std::string k_name = "chunk " + std::to_string(chunk_index) + " k";
  const std::string v_name = "chunk " + std::to_string(chunk_index) + " v";
  const char* dtype_source = "the backend's dtype";
  check_operand(q, {"q", params.dtype, dtype_source, meta.num_q_tokens, "cu_seqlens_q", heads, dqk, "qk_head_dim"});
  check_operand(k, {k_name.c_str(), params.dtype, dtype_source, chunk_tokens, "the chunk's cu_seqlens_k", heads, dqk,
                    "qk_head_dim"});
  check_operand(v, {v_name.c_str(), params.dtype, dtype_source, chunk_tokens, "the chunk's cu_seqlens_k", heads, dv,
                    "v_head_dim"});
  check_descales(params, descales);
  if (out) {
    check_operand(*out, {"chunk out", params.output_dtype(), "the backend's output dtype", meta.num_q_tokens,
                         "cu_seqlens_q", heads, dv, "v_head_dim"});
  }
  if (lse) check_lse(*lse, "chunk lse", heads, meta.num_q_tokens);
  std::vector<detail::Operand> inputs{{"q", q}, {k_name, k}, {v_name, v}};
  detail::add_descale_operands(inputs, descales);
  detail::check_no_overlap("", {{"chunk out", out}, {"chunk lse", lse}}, inputs);
}

}  // namespace

void check_chunk_args(const PrefillBackend& backend, const AttentionPlan& plan, const Queue& queue, int chunk_index,
                      const TensorView& q, const TensorView& k, const TensorView& v, float scale,
                      const std::optional<TensorView>& out, const std::optional<TensorView>& lse,
                      const std::optional<InputDescales>& descales) {
  check_chunk_shapes(backend, plan, chunk_index, q, k, v, scale, out, lse, descales);
  check_all_accessible(
      queue, {{"q", &q}, {"chunk k", &k}, {"chunk v", &v}, {"chunk out", given(out)}, {"chunk lse", given(lse)}});
  check_descales_accessible(queue, descales);
}

AttentionResult allocate_result(const PrefillBackend& backend, Queue& queue, std::int64_t num_q, bool return_lse,
                                std::optional<TensorView> out, DType out_dtype, std::optional<TensorView> lse) {
  if (lse && !return_lse) bad_argument(backend.name() + ": an lse view was given but return_lse is false");
  const std::int64_t heads = backend.params().num_heads;
  const std::int64_t dv = backend.params().dims.v_head_dim;
  AttentionResult result;
  if (out) {
    result.out = *out;
  } else {
    result.out_storage = UsmBuffer::device(queue, allocation_bytes(num_q * heads * dv, out_dtype));
    result.out = TensorView::contiguous(result.out_storage.get(), out_dtype, {num_q, heads, dv}, MemoryKind::device);
  }
  if (lse) {
    result.lse = *lse;
  } else if (return_lse) {
    result.lse_storage = UsmBuffer::device(queue, allocation_bytes(heads * num_q, DType::float32));
    result.lse = TensorView::contiguous(result.lse_storage.get(), DType::float32, {heads, num_q}, MemoryKind::device);
  }
  return result;
}

}  // namespace mla
