// torch.ops.mlaprefill: the prefill operations as PyTorch operators, with
// outputs from PyTorch's allocator (at::empty) and, for CUDA tensors, work
// on PyTorch's current stream through a queue that borrows it.
//
// prefill and context_chunk take float8_e4m3 q, k and v (uint8 bytes, or
// float8_e4m3fn where PyTorch has it) with optional descale tensors and the
// output's `out_dtype` (docs/contract.md §4).
//
// Each operator selects a backend the way the library does (configuration,
// MLA_PREFILL_BACKEND, or the `backend` argument) for the tensors' device:
// the host platform for CPU tensors, the machine's GPU for GPU tensors.
// Backends are kept per (choice, device, dtype, heads, dims); the softmax
// scale is an argument of each call. Calls on one backend take turns, since
// a backend holds the prepared step.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#ifdef MLA_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "mla/backend/checks.hpp"
#include "mla/mla.hpp"
#include "torch_tensors.hpp"

namespace mla::python {
namespace {

struct BackendKey {
  std::string choice;
  bool gpu = false;
  int device = 0;
  DType dtype = DType::float32;
  std::optional<DType> out_dtype;  // fp8 inputs' output dtype
  int heads = 0;
  int p = 0, r = 0, v = 0;

  auto tie() const { return std::tie(choice, gpu, device, dtype, out_dtype, heads, p, r, v); }
  bool operator<(const BackendKey& other) const { return tie() < other.tie(); }
};

struct CachedBackend {
  explicit CachedBackend(Queue q) : queue(std::move(q)) {}
  std::unique_ptr<PrefillBackend> backend;
  Queue queue;
  std::mutex mutex;
};

// PyTorch 1.x registers optional arguments as c10::optional.
template <class T>
std::optional<T> std_optional(const c10::optional<T>& value) {
  return value ? std::optional<T>(*value) : std::nullopt;
}

// The queue an operator call runs on: the backend's own for CPU tensors, a
// queue borrowing PyTorch's current stream for GPU tensors.
Queue queue_for(const CachedBackend& cached, const at::Tensor& q) {
  if (q.is_cpu()) return cached.queue;
#ifdef MLA_TORCH_CUDA
  if (q.is_cuda()) {
    void* stream = at::cuda::getCurrentCUDAStream(q.device().index()).stream();
    return Queue::borrow(cached.queue.backend(), static_cast<int>(q.device().index()), stream);
  }
#endif
  raise(
      ErrorCategory::not_supported,
      "torch.ops.mlaprefill in this build takes CPU tensors" +
          std::string(device_backend_built(DeviceBackend::cuda) ? " and CUDA tensors of a CUDA-enabled PyTorch" : "") +
          "; q is on " + q.device().str());
}

// The dims of attention on q [N, H, P+R] and v [N, H, V] with R = rope_dim.
MlaDims dims_of(const at::Tensor& q, const at::Tensor& v, std::int64_t rope_dim) {
  if (q.dim() != 3 || v.dim() != 3) raise(ErrorCategory::invalid_argument, "q and v must be 3-d [N, H, D]");
  if (rope_dim < 0 || rope_dim > q.size(2)) {
    raise(ErrorCategory::invalid_argument,
          "qk_rope_head_dim " + std::to_string(rope_dim) + " does not fit q's head dim " + std::to_string(q.size(2)));
  }
  return {static_cast<int>(q.size(2) - rope_dim), static_cast<int>(rope_dim), static_cast<int>(v.size(2))};
}

// The library's dtype of an `out_dtype` argument (float8_e4m3 inputs'
// output: float16 or bfloat16; the library refuses the rest by name).
std::optional<DType> out_dtype_of(const c10::optional<at::ScalarType>& type) {
  if (!type) return std::nullopt;
  switch (*type) {
    case at::kHalf:
      return DType::float16;
    case at::kBFloat16:
      return DType::bfloat16;
    case at::kFloat:
      return DType::float32;
    default:
      raise(ErrorCategory::invalid_argument,
            "out_dtype " + std::string(c10::toString(*type)) +
                " is not an output type; float8_e4m3 inputs write float16 or bfloat16");
  }
}

at::ScalarType scalar_type_of(DType dtype) {
  switch (dtype) {
    case DType::float16:
      return at::kHalf;
    case DType::bfloat16:
      return at::kBFloat16;
    case DType::float32:
      return at::kFloat;
    case DType::float8_e4m3:
      break;
  }
  raise(ErrorCategory::internal, "scalar_type_of: no PyTorch output type for float8_e4m3");
}

CachedBackend& backend_for(const at::Tensor& q, const MlaDims& dims, const std::optional<std::string>& choice,
                           std::optional<DType> out_dtype = std::nullopt) {
  static std::mutex cache_mutex;
  static std::map<BackendKey, std::unique_ptr<CachedBackend>> cache;
  static std::optional<Selector> selector;

  const TensorView qv = view_of(q, "q");
  BackendKey key;
  key.choice = choice.value_or("");
  key.gpu = !q.is_cpu();
  key.device = key.gpu ? static_cast<int>(q.device().index()) : 0;
  key.dtype = qv.dtype;
  key.out_dtype = out_dtype;
  key.heads = qv.rank > 1 ? static_cast<int>(qv.shape[1]) : 0;
  key.p = dims.qk_nope_head_dim;
  key.r = dims.qk_rope_head_dim;
  key.v = dims.v_head_dim;

  std::lock_guard lock(cache_mutex);
  auto& slot = cache[key];
  if (slot) return *slot;
  if (!selector) {
    Config config = resolve_config();
    configure(config);
    selector.emplace(std::move(config));
  }
  const DeviceCapability platform = key.gpu ? current_platform() : host_capability();
  const Selection selection = selector->select({key.dtype, dims}, platform, choice);
  BackendParams params;
  params.num_heads = key.heads;
  params.dims = dims;
  params.dtype = key.dtype;
  params.out_dtype = key.out_dtype;
  auto cached = std::make_unique<CachedBackend>(make_queue(selection, key.device));
  cached->backend = selector->create(selection, params);
  slot = std::move(cached);
  return *slot;
}

PrefillMetadata metadata_of(const at::Tensor& cu_q, const at::Tensor& cu_k, bool causal) {
  PrefillMetadata metadata;
  metadata.cu_seqlens_q = cu_seqlens_of(cu_q, "cu_seqlens_q");
  metadata.cu_seqlens_k = cu_seqlens_of(cu_k, "cu_seqlens_k");
  metadata.max_seqlen_q = max_seqlen(metadata.cu_seqlens_q);
  metadata.max_seqlen_k = max_seqlen(metadata.cu_seqlens_k);
  metadata.causal = causal;
  return metadata;
}

std::tuple<at::Tensor, at::Tensor> empty_outputs(const at::Tensor& q, const at::Tensor& v, DType out_dtype) {
  at::Tensor out = at::empty({q.size(0), q.size(1), v.size(2)}, q.options().dtype(scalar_type_of(out_dtype)));
  at::Tensor lse = at::empty({q.size(1), q.size(0)}, q.options().dtype(at::kFloat));
  return {out, lse};
}

// float8_e4m3 inputs' descales: each none (1), or a float32 tensor of one
// value (0-d or 1-d) or one per head on q's device.
struct TorchDescales {
  c10::optional<at::Tensor> q, k, v;
  bool given() const { return q || k || v; }
};

// A descale argument as the library takes it; a 0-d tensor is viewed as
// [1] (kept alive in `keep`).
Descale descale_of(const c10::optional<at::Tensor>& tensor, const at::Tensor& q, const char* what, at::Tensor& keep) {
  if (!tensor || !tensor->defined()) return Descale(1.0f);
  keep = tensor->dim() == 0 ? tensor->reshape({1}) : *tensor;
  return Descale::of(view_on(keep, what, q, "q"));
}

// docs/contract.md §12's arguments of an attention call.
struct TorchMask {
  c10::optional<at::Tensor> topk;
  std::int64_t window = 0;
  c10::optional<at::Tensor> sinks;
  // Per sequence, the position in its whole key range of the call's key 0
  // (vLLM's key_starts: the context before the keys; none: 0).
  std::optional<std::vector<std::int64_t>> key_starts;
  bool chunk = false;  // context_chunk's call
};

std::optional<std::vector<std::int64_t>> list_of(const c10::optional<c10::IntArrayRef>& values) {
  if (!values) return std::nullopt;
  return std::vector<std::int64_t>(values->begin(), values->end());
}

AttentionMask mask_of(const TorchMask& torch_mask, const at::Tensor& q) {
  AttentionMask mask;
  if (torch_mask.topk && torch_mask.topk->defined()) mask.topk = topk_mask_of(*torch_mask.topk, q, "q");
  mask.window = torch_mask.window;
  if (torch_mask.sinks && torch_mask.sinks->defined()) mask.sinks = view_on(*torch_mask.sinks, "sinks", q, "q");
  return mask;
}

// Key positions start at key_starts[b] (§12): the call's metadata gets a
// context chunk of those lengths ahead of its keys, so the plan's positions
// are the caller's. A context chunk's own keys then run as chunk 1, after
// new tokens of no keys.
PrefillMetadata with_key_starts(PrefillMetadata metadata, const std::vector<std::int64_t>& starts, bool chunk) {
  if (starts.size() + 1 != metadata.cu_seqlens_q.size()) {
    raise(ErrorCategory::invalid_argument, "key_starts has " + std::to_string(starts.size()) + " entries for " +
                                               std::to_string(metadata.batch_size()) + " sequences");
  }
  std::vector<int> before;
  for (std::size_t b = 0; b < starts.size(); ++b) {
    if (starts[b] < 0 || starts[b] > std::numeric_limits<std::int32_t>::max()) {
      raise(ErrorCategory::invalid_argument,
            "key_starts[" + std::to_string(b) + "] = " + std::to_string(starts[b]) + " is outside 0..2^31-1");
    }
    before.push_back(static_cast<int>(starts[b]));
  }
  std::vector<int> own;
  for (std::size_t b = 0; b + 1 < metadata.cu_seqlens_k.size(); ++b)
    own.push_back(metadata.cu_seqlens_k[b + 1] - metadata.cu_seqlens_k[b]);
  metadata.add_chunk(before);
  if (!chunk) return metadata;
  metadata.add_chunk(own);
  metadata.cu_seqlens_k.assign(metadata.cu_seqlens_k.size(), 0);
  metadata.max_seqlen_k = 0;
  return metadata;
}

// Attention of q against k/v with the given cu_seqlens: causal for new
// tokens, non-causal for a context chunk. Returns (out [Nq, H, V], lse [H, Nq]).
std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& cu_q, const at::Tensor& cu_k, double scale, bool causal,
                                             std::int64_t rope_dim, const std::optional<std::string>& backend,
                                             const TorchDescales& descales, c10::optional<at::ScalarType> out_type,
                                             const TorchMask& torch_mask) {
  std::tuple<at::Tensor, at::Tensor> result;
  translate_errors([&] {
    CachedBackend& cached = backend_for(q, dims_of(q, v, rope_dim), backend, out_dtype_of(out_type));
    PrefillMetadata metadata = metadata_of(cu_q, cu_k, causal);
    if (q.size(0) != metadata.num_q_tokens()) {
      raise(ErrorCategory::invalid_argument, "q has " + std::to_string(q.size(0)) +
                                                 " tokens but cu_seqlens_q ends at " +
                                                 std::to_string(metadata.num_q_tokens()));
    }
    result = empty_outputs(q, v, cached.backend->params().output_dtype());
    std::optional<InputDescales> input_descales;
    at::Tensor keep_q, keep_k, keep_v;
    if (descales.given()) {
      input_descales =
          InputDescales{descale_of(descales.q, q, "q_descale", keep_q), descale_of(descales.k, q, "k_descale", keep_k),
                        descale_of(descales.v, q, "v_descale", keep_v)};
    }
    const AttentionMask mask = mask_of(torch_mask, q);
    if (torch_mask.chunk && mask.window != 0) {
      // A lone chunk call does not know where its queries sit in the whole
      // key range, which a window needs (§12).
      raise(ErrorCategory::invalid_argument,
            "context_chunk takes no window: its queries' positions are unknown to one chunk call; pass the window "
            "to prefill, or run the step with mlaprefill.run_prefill_step");
    }
    const bool offset = torch_mask.key_starts.has_value();
    if (offset) metadata = with_key_starts(std::move(metadata), *torch_mask.key_starts, torch_mask.chunk);
    Queue queue = queue_for(cached, q);
    std::lock_guard lock(cached.mutex);
    cached.backend->prepare(queue, metadata);
    if (offset && torch_mask.chunk) {
      cached.backend->run_context_chunk(queue, 1, view_of(q, "q"), view_on(k, "k", q, "q"), view_on(v, "v", q, "q"),
                                        static_cast<float>(scale), view_of(std::get<0>(result), "out"),
                                        view_of(std::get<1>(result), "lse"), input_descales, mask);
      return;
    }
    cached.backend->run_new_tokens(queue, view_of(q, "q"), view_on(k, "k", q, "q"), view_on(v, "v", q, "q"),
                                   static_cast<float>(scale), true, view_of(std::get<0>(result), "out"), std::nullopt,
                                   view_of(std::get<1>(result), "lse"), input_descales, mask);
  });
  return result;
}

std::tuple<at::Tensor, at::Tensor> prefill(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu_q, const at::Tensor& cu_k,
    double scale, bool causal, std::int64_t rope_dim, const c10::optional<std::string>& backend,
    const c10::optional<at::Tensor>& q_descale, const c10::optional<at::Tensor>& k_descale,
    const c10::optional<at::Tensor>& v_descale, c10::optional<at::ScalarType> out_dtype,
    const c10::optional<at::Tensor>& topk_mask, std::int64_t window, const c10::optional<at::Tensor>& sinks,
    c10::optional<c10::IntArrayRef> key_starts) {
  return attention(q, k, v, cu_q, cu_k, scale, causal, rope_dim, std_optional(backend),
                   {q_descale, k_descale, v_descale}, out_dtype,
                   {topk_mask, window, sinks, list_of(key_starts), false});
}

std::tuple<at::Tensor, at::Tensor> context_chunk(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu_q, const at::Tensor& cu_k,
    double scale, std::int64_t rope_dim, const c10::optional<std::string>& backend,
    const c10::optional<at::Tensor>& q_descale, const c10::optional<at::Tensor>& k_descale,
    const c10::optional<at::Tensor>& v_descale, c10::optional<at::ScalarType> out_dtype,
    const c10::optional<at::Tensor>& topk_mask, std::int64_t window, const c10::optional<at::Tensor>& sinks,
    c10::optional<c10::IntArrayRef> key_starts) {
  return attention(q, k, v, cu_q, cu_k, scale, false, rope_dim, std_optional(backend),
                   {q_descale, k_descale, v_descale}, out_dtype, {topk_mask, window, sinks, list_of(key_starts), true});
}

std::tuple<at::Tensor, at::Tensor> merge(const at::Tensor& prefix_out, const at::Tensor& prefix_lse,
                                         const at::Tensor& suffix_out, const at::Tensor& suffix_lse,
                                         c10::optional<std::int64_t> tokens_with_context,
                                         const c10::optional<std::string>& backend,
                                         const c10::optional<at::Tensor>& sinks) {
  std::tuple<at::Tensor, at::Tensor> result;
  translate_errors([&] {
    // A merge reads no q or k: a backend of the outputs' dtype, heads and V
    // serves it, selected as for DeepSeek's P and R.
    const int v_dim = prefix_out.dim() == 3 ? static_cast<int>(prefix_out.size(2)) : 0;
    const MlaDims dims{deepseek_dims.qk_nope_head_dim, deepseek_dims.qk_rope_head_dim, v_dim};
    CachedBackend& cached = backend_for(prefix_out, dims, std_optional(backend));
    result = std::make_tuple(at::empty_like(prefix_out, at::MemoryFormat::Contiguous),
                             at::empty_like(prefix_lse, at::MemoryFormat::Contiguous));
    MergeArgs args;
    args.prefix_out = view_of(prefix_out, "prefix_output");
    args.prefix_lse = view_on(prefix_lse, "prefix_lse", prefix_out, "prefix_output");
    args.suffix_out = view_on(suffix_out, "suffix_output", prefix_out, "prefix_output");
    args.suffix_lse = view_on(suffix_lse, "suffix_lse", prefix_out, "prefix_output");
    args.out = view_of(std::get<0>(result), "output");
    args.out_lse = view_of(std::get<1>(result), "output_lse");
    args.prefill_tokens_with_context = std_optional(tokens_with_context);
    if (sinks && sinks->defined()) args.sinks = view_on(*sinks, "sinks", prefix_out, "prefix_output");
    Queue queue = queue_for(cached, prefix_out);
    std::lock_guard lock(cached.mutex);
    cached.backend->merge_attn_states(queue, args);
  });
  return result;
}

}  // namespace
}  // namespace mla::python

TORCH_LIBRARY(mlaprefill, m) {
  m.def(
      "prefill(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, float scale, "
      "bool causal=True, int qk_rope_head_dim=64, str? backend=None, Tensor? q_descale=None, "
      "Tensor? k_descale=None, Tensor? v_descale=None, ScalarType? out_dtype=None, Tensor? topk_mask=None, "
      "int window=0, Tensor? sinks=None, int[]? key_starts=None) -> (Tensor, Tensor)");
  m.def(
      "context_chunk(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, float scale, "
      "int qk_rope_head_dim=64, str? backend=None, Tensor? q_descale=None, Tensor? k_descale=None, "
      "Tensor? v_descale=None, ScalarType? out_dtype=None, Tensor? topk_mask=None, int window=0, "
      "Tensor? sinks=None, int[]? key_starts=None) -> (Tensor, Tensor)");
  m.def(
      "merge_attn_states(Tensor prefix_output, Tensor prefix_lse, Tensor suffix_output, Tensor suffix_lse, "
      "int? prefill_tokens_with_context=None, str? backend=None, Tensor? sinks=None) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mlaprefill, CPU, m) {
  m.impl("prefill", &mla::python::prefill);
  m.impl("context_chunk", &mla::python::context_chunk);
  m.impl("merge_attn_states", &mla::python::merge);
}

#ifdef MLA_TORCH_CUDA
TORCH_LIBRARY_IMPL(mlaprefill, CUDA, m) {
  m.impl("prefill", &mla::python::prefill);
  m.impl("context_chunk", &mla::python::context_chunk);
  m.impl("merge_attn_states", &mla::python::merge);
}
#endif
