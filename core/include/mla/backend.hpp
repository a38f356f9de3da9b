// The prefill backend interface, mirroring vLLM's MLAPrefillBackend: a static
// description that can be validated without constructing anything, and an
// object that runs new tokens, context chunks and the LSE merge; the step's
// metadata; and one whole prefill step over any backend. What an engine
// calls; a backend's author derives from PrefillBackend with the helpers of
// mla/backend/ (checks.hpp, latents.hpp, registration.hpp).
//
// Tensor conventions (docs/contract.md §1-2), Nq = metadata.num_q_tokens():
//   q   [Nq, H, dqk]   k [Nk, H, dqk]   v [Nk, H, V]   (strides are honoured)
//   out [Nq, H, V]     lse [H, Nq] float32, natural log, -inf for rows without keys
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mla/queue.hpp"

namespace mla {

// Cumulative sequence lengths on the host, vLLM's cu_seqlens: B+1 entries that
// start at 0 and never decrease. Backends copy them to the device in prepare().
struct PrefillMetadata {
  std::vector<std::int32_t> cu_seqlens_q;  // [B+1] new (query) tokens per sequence
  std::vector<std::int32_t> cu_seqlens_k;  // [B+1] keys of the new tokens; equal to cu_seqlens_q
                                           // in vLLM, longer rows allowed (bottom-right causal)
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  bool causal = true;

  // One entry per context chunk: keys of cached tokens, [B+1] each.
  struct Chunk {
    std::vector<std::int32_t> cu_seqlens_k;
    int max_seqlen_k = 0;
  };
  std::vector<Chunk> chunks;

  int batch_size() const { return cu_seqlens_q.empty() ? 0 : static_cast<int>(cu_seqlens_q.size()) - 1; }
  std::int64_t num_q_tokens() const { return cu_seqlens_q.empty() ? 0 : cu_seqlens_q.back(); }
  std::int64_t num_k_tokens() const { return cu_seqlens_k.empty() ? 0 : cu_seqlens_k.back(); }

  // Builds metadata from per-sequence lengths and fills the max lengths.
  static PrefillMetadata from_lengths(const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                                      bool causal = true);
  // Appends a context chunk from per-sequence key lengths.
  void add_chunk(const std::vector<int>& chunk_k_lens);
};

// A step's metadata where an engine keeps it: cu_seqlens arrays already in
// memory the queue's device reads (vLLM's query_start_loc and the chunked
// context's cu_seq_lens), and the sizes the engine knows on the host. GPU
// backends read the arrays on the device only, so preparing a step copies
// nothing and waits for nothing, and can be captured into a CUDA graph;
// other backends read them through the queue (on the host queue, directly).
// The arrays must stay valid and unchanged until the step's work is done.
struct DevicePrefillMetadata {
  int batch_size = 0;                          // B
  const std::int32_t* cu_seqlens_q = nullptr;  // [B+1]
  const std::int32_t* cu_seqlens_k = nullptr;  // [B+1]
  std::int64_t num_q_tokens = 0;               // cu_seqlens_q[B]
  std::int64_t num_k_tokens = 0;               // cu_seqlens_k[B]
  // At least the longest sequence: GPU grids are sized by them and cannot
  // check them (backends that read the arrays on the host do).
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  bool causal = true;
  MemoryKind memory = MemoryKind::device;  // where the arrays live

  struct Chunk {
    const std::int32_t* cu_seqlens_k = nullptr;  // [B+1]
    std::int64_t num_k_tokens = 0;               // cu_seqlens_k[B]
    int max_seqlen_k = 0;
  };
  std::vector<Chunk> chunks;
};

// What a selection is asked for.
struct SelectorConfig {
  DType dtype = DType::bfloat16;
  MlaDims dims = deepseek_dims;

  friend bool operator==(const SelectorConfig&, const SelectorConfig&) = default;
};

// "dtype=bfloat16, dims=(qk_nope_head_dim=128, ...)"
std::string to_string(const SelectorConfig& config);

struct Availability {
  bool available = true;
  std::string reason;  // why not, e.g. "built without CUDA"
};

// Everything the selector needs to know about a backend without building one.
struct BackendDescription {
  std::string name;  // "REFERENCE", "CUDA_FLASH", ...
  std::vector<DType> dtypes{DType::float16, DType::bfloat16};
  // Why a listed dtype does not run on a device the backend supports (empty:
  // it does), e.g. CUDA_FLASH's float8_e4m3 inputs below compute capability
  // 8.9. validate() asks it in every build, after the dtype check. Empty: every
  // listed dtype runs on every supported device.
  std::function<std::string(DType dtype, const DeviceCapability& device)> dtype_refusal;
  std::vector<MlaDims> dims;                                         // empty: any dims
  std::function<bool(const DeviceCapability&)> supports_capability;  // empty: any
  std::function<Availability()> availability;                        // empty: always available
  // Whether this build carries code for a device the backend otherwise
  // supports, e.g. a HIP build without a code object for the device's gfx
  // arch. validate() asks only when the capability and `availability` pass,
  // and reports a refusal as "required dependencies not available (...)".
  // Empty: every supported device.
  std::function<Availability(const DeviceCapability&)> device_availability;
  // The backend's kernel chooser, for backends that have one: why no kernel
  // of this build serves `request` on `device`, worded to follow the name
  // (empty: one does). validate() asks it last, when every check above
  // passed; the backend asks the same chooser when it is built and before it
  // launches. Empty: the checks above are the whole answer.
  std::function<std::string(const SelectorConfig& request, const DeviceCapability& device)> kernel_refusal;
  // Output quantisation the attention epilogue can write (fp8 e4m3 static per-tensor).
  bool fp8_output = false;
  // Set on the attention registry's entries: ordinary multi-head attention
  // needs qk_head_dim == v_head_dim, and validate() says so when it is not.
  bool requires_equal_qk_v = false;
  // The queue kinds the backend's operations accept, preferred first:
  // make_queue() creates the first one this process can. Empty: any kind (a
  // backend that reads the queue it is handed, as plugins do); make_queue()
  // then gives Queue::default_queue().
  std::vector<DeviceBackend> queue_kinds;
};

// Reasons, in docs/contract.md §8 order and wording, why `description` cannot serve
// `config` on `capability`. Empty means valid.
std::vector<std::string> validate(const BackendDescription& description, const DeviceCapability& capability,
                                  const SelectorConfig& config);

// A queue `description`'s backend runs on: the first of its queue_kinds this
// build has (device `device_index` for a GPU kind), or Queue::default_queue()
// when it lists none. Raises Error(not_supported) when the build has none of
// the kinds and Error(device) when the machine lacks the device.
Queue make_queue(const BackendDescription& description, int device_index = 0);

// Raises Error(not_supported) naming the backend, the kinds it accepts and the
// queue's kind unless `queue` is of one of description.queue_kinds (any queue
// passes when the list is empty).
void check_queue(const BackendDescription& description, const Queue& queue);

// Constructor arguments of every backend (vLLM: num_heads, kv_lora_rank, dims).
// The softmax scale is not among them: each attention call takes its own.
struct BackendParams {
  int num_heads = 16;
  int kv_lora_rank = 512;
  MlaDims dims = deepseek_dims;
  DType dtype = DType::bfloat16;  // element type of q, k, v
  // Element type of the output (out, a context chunk's out, a step's out):
  // empty means `dtype`. It may differ only for float8_e4m3 inputs, whose
  // output is float16 or bfloat16 and must be named here
  // (docs/contract.md §4). fp8 output is asked for per call (out_scale).
  std::optional<DType> out_dtype = std::nullopt;

  // out_dtype, or dtype when it is empty.
  DType output_dtype() const { return out_dtype.value_or(dtype); }
};

// The descale of a float8_e4m3 input, q, k or v (docs/contract.md §4): the
// value an input byte stands for is its e4m3 value times the descale of its
// head. A host float for the whole tensor (it converts implicitly), or
// float32 in memory the queue's device reads, read when the call runs: one
// value (shape [] or [1]) or one per head ([H]). A host descale must be
// finite and positive; so must a tensor's values, which the backends that
// read them on the host (REFERENCE, KOKKOS) check and a GPU kernel cannot.
struct Descale {
  float value = 1.0f;
  TensorView values;  // when not an empty view, the descales are read here instead of `value`

  Descale(float host_value = 1.0f) : value(host_value) {}  // NOLINT(google-explicit-constructor): a float is a descale
  static Descale of(const TensorView& tensor) {
    Descale d;
    d.values = tensor;
    return d;
  }
  bool is_tensor() const { return !values.empty_view(); }
  // The tensor as its elements are checked and read: a 0-d tensor as shape
  // [1] (a 0-d view has no elements to check, TensorView::numel).
  TensorView elements() const {
    TensorView view = values;
    if (view.rank == 0 && view.data != nullptr) {
      view.rank = 1;
      view.shape[0] = 1;
      view.stride[0] = 1;
    }
    return view;
  }
};

// The descales of one attention call's float8_e4m3 q, k and v; each is 1
// unless given. Calls with inputs of another dtype take none.
struct InputDescales {
  Descale q, k, v;
};

// vLLM's bit-packed top-k key mask (its masked-MHA layout; docs/contract.md
// §12): 32-bit words, row (b, i) for query i of sequence b at
// words + b * batch_stride + i * row_stride, and bit (p & 31) of the row's
// word p >> 5 set when the key at position p of the sequence's whole key
// range (its context keys, chunk after chunk, then its new-token keys) may be
// seen. Rows past a sequence's queries and bits past its keys are not read.
struct TopkMask {
  const std::uint32_t* words = nullptr;  // 16-byte aligned; null: no mask
  std::int64_t batch_size = 0;           // B, the metadata's
  std::int64_t rows = 0;                 // rows per sequence: at least its query count
  std::int64_t words_per_row = 0;        // 32 of them cover every key position of every sequence
  std::int64_t batch_stride = 0;         // words from one sequence's rows to the next; a multiple of 4
  std::int64_t row_stride = 0;           // words from one row to the next; a multiple of 4, >= words_per_row
  MemoryKind memory = MemoryKind::host;  // where the words live

  bool empty() const { return words == nullptr; }
  // [B, rows, words_per_row] packed densely (strides rows * words_per_row and
  // words_per_row, so words_per_row must be a multiple of 4).
  static TopkMask contiguous(const std::uint32_t* words, std::int64_t batch_size, std::int64_t rows,
                             std::int64_t words_per_row, MemoryKind memory = MemoryKind::host) {
    return TopkMask{words, batch_size, rows, words_per_row, rows * words_per_row, words_per_row, memory};
  }
};

// Which keys an attention call's queries may see beyond causality, and the
// sinks of its softmax (docs/contract.md §12): DeepSeek-V3.2's top-k masks,
// sliding windows and attention sinks. Default: none of them.
struct AttentionMask {
  TopkMask topk = {};  // empty: every key passes
  // 0: no window; W >= 1: the query at position p sees only keys at
  // positions above p - W (itself and the W - 1 before it when causal).
  std::int64_t window = 0;
  // float32 [H]: each head's sink logit, on the scale of the scaled scores,
  // added to the softmax's denominator only (-inf: none for that head).
  // Empty view: no sinks. The LSE returned never includes the sink.
  TensorView sinks = {};

  bool masks_keys() const { return !topk.empty() || window != 0; }
  bool has_sinks() const { return !sinks.empty_view(); }
  bool empty() const { return !masks_keys() && !has_sinks(); }
  // The same mask without its sinks: what a step's partial calls take.
  AttentionMask without_sinks() const {
    AttentionMask mask = *this;
    mask.sinks = TensorView{};
    return mask;
  }
};

// The scale of fp8 e4m3 output, out = saturate(value / scale): a host float
// (it converts implicitly), or a float32 in memory the queue's device reads,
// read when the kernel runs, as engines keep it (a scale tensor that a CUDA
// graph replays with). A host scale must be finite and positive; a device
// scale cannot be checked.
struct OutputScale {
  float value = 1.0f;
  const float* device = nullptr;  // when set, the scale is read here instead of `value`

  OutputScale(float host_value) : value(host_value) {}  // NOLINT(google-explicit-constructor): a float is a scale
  static OutputScale on_device(const float* scale) {
    OutputScale s(1.0f);
    s.device = scale;
    return s;
  }
  bool is_device() const { return device != nullptr; }
};

// Output quantisation keys accepted by supports_quant_output.
enum class QuantKey { fp8_e4m3_static_per_tensor };

// Attention output. When the caller passes `out`, `out` views it and
// out_storage is empty; otherwise the backend allocated out_storage on the
// queue. `lse` is an empty view when it was not requested.
struct AttentionResult {
  UsmBuffer out_storage;
  UsmBuffer lse_storage;
  TensorView out;  // [Nq, H, V]
  TensorView lse;  // [H, Nq] float32
};

// Arguments of merge_attn_states (docs/contract.md §3).
struct MergeArgs {
  TensorView prefix_out;                                    // [N, H, V]
  TensorView prefix_lse;                                    // [H, N] float32
  TensorView suffix_out;                                    // [N, H, V]
  TensorView suffix_lse;                                    // [H, N] float32
  TensorView out;                                           // [N, H, V]; float8_e4m3 allowed with out_scale
  TensorView out_lse;                                       // [H, N] float32, optional (empty view: not written)
  std::optional<std::int64_t> prefill_tokens_with_context;  // tokens >= T copy the suffix
  std::optional<OutputScale> out_scale;                     // required for fp8 output
  // float32 [H] sink logits applied once to the merged result (§12): both
  // sides are partials without sinks; empty view: none.
  TensorView sinks = {};
};

// Memory of the caller's that a call works in: `bytes` at `data`, 64-byte
// aligned, in memory the queue's device reads and writes. Empty (null, 0
// bytes) where the call needs none (AttentionPlan::workspace_bytes == 0).
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

struct LatentGather;  // mla/backend/latents.hpp

// Splitting the keys of an attention call (the flash backends' split-KV,
// docs/contract.md §3): a call whose (query tile, head) blocks cannot fill the
// GPU cuts its keys into at most max_kv_splits ranges, writes one float32
// partial output and LSE per range into the plan's workspace and merges them
// by their LSE. The partials take splits x query-head rows, at most
// kv_split_row_budget rows in all, of v_head_dim + 1 floats each.
inline constexpr int max_kv_splits = 16;
inline constexpr std::int64_t kv_split_row_budget = 16384;

// Bytes enough for the partials of any split of a call over `num_q_tokens`
// queries: min(max_kv_splits * rows, kv_split_row_budget) rows (rows =
// num_q_tokens * num_heads) plus 256 bytes of alignment; 0 without queries.
// Never less for more queries; at most kv_split_row_budget * (v_head_dim +
// 1) * 4 + 256 bytes (8.5 MB at v_head_dim 128).
std::size_t attention_scratch_size(const BackendParams& params, std::int64_t num_q_tokens);

// How a plan is made.
struct PlanOptions {
  // Let the flash backends split a call's keys (split-KV) when its queries
  // alone cannot fill the GPU; the plan's workspace then holds the
  // partials. The steps (run_prefill_step, run_mla_prefill) ask for it when
  // there are context chunks; single calls keep one pass by default, so
  // their results do not depend on the GPU's size (docs/contract.md §6).
  bool split_keys = false;
};

// What a backend keeps in a plan for its own calls (the flash backends: the
// kernel tile, where the work lists lie in the workspace, each phase's split
// count). Opaque to everyone else; immutable once planned.
struct PlanDetail {
  virtual ~PlanDetail() = default;
};

// A step's attention calls planned for one backend and one device, once, on
// the host: a value, so it can be kept, copied, compared and run again.
// What it plans: the new tokens (phase 0) and every context
// chunk (phase 1 + chunk index). Make it with PrefillBackend::plan, put its
// words where the device reads them with upload_plan, then run any of its
// calls, in any order, with the tensors of the step (run_new_tokens /
// run_context_chunk taking the plan): those calls keep no state and change
// nothing in the backend.
struct AttentionPlan {
  std::string backend;  // name() of the backend that planned it
  BackendParams params;
  DeviceBackend queue_kind = DeviceBackend::host;  // the queue it was planned for
  int device_index = 0;
  // The step's sizes.
  int batch_size = 0;
  std::int64_t num_q_tokens = 0;
  std::int64_t num_k_tokens = 0;
  std::vector<std::int64_t> chunk_k_tokens;  // one entry per context chunk
  bool causal = true;
  // The lengths on the host: planned from host metadata, or read back from
  // device metadata by a backend that reads them on the host. Empty when a
  // flash backend planned from device metadata (it never reads them).
  std::optional<PrefillMetadata> lengths;
  // Bytes of workspace every call of the plan works in (0: none), and the
  // 32-bit words upload_plan puts at its start: cu_seqlens and heaviest-first
  // work lists on the flash backends, nothing on the others. The calls of
  // one plan share the workspace: enqueue them in order on one stream.
  std::size_t workspace_bytes = 0;
  std::vector<std::int32_t> workspace_words;
  std::shared_ptr<const PlanDetail> detail;  // the backend's own part (null: none)

  int num_chunks() const { return static_cast<int>(chunk_k_tokens.size()); }
};

// What PrefillBackend::run_new_tokens and run_context_chunk hand a backend
// once the shared checks passed: the phase, the caller's tensors and the
// result views (allocated on the queue where the caller passed none).
struct AttentionCall {
  const AttentionPlan* plan = nullptr;
  Workspace workspace;  // at least plan->workspace_bytes, words uploaded
  int chunk = -1;       // -1: the new tokens (causal as planned); else the context chunk (non-causal)
  TensorView q, k, v;
  float scale = 1.0f;
  TensorView out;                         // [Nq, H, V]; float8_e4m3 with out_scale
  TensorView lse;                         // [H, Nq] float32; empty view: not wanted
  std::optional<OutputScale> out_scale;   // new tokens only
  std::optional<InputDescales> descales;  // float8_e4m3 inputs only; absent: all 1
  AttentionMask mask = {};                // §12; empty unless the backend takes masks
  const char* operation = "";             // "run_new_tokens" or "run_context_chunk", for messages
};

class PrefillBackend {
 public:
  explicit PrefillBackend(const BackendParams& params);
  virtual ~PrefillBackend() = default;
  PrefillBackend(const PrefillBackend&) = delete;
  PrefillBackend& operator=(const PrefillBackend&) = delete;

  virtual std::string name() const = 0;
  const BackendParams& params() const { return params_; }

  // ---- Planned calls: no state, one lifecycle (plan, upload, run). ----

  // Checks `metadata` and plans the step's calls for `queue`'s device:
  // sizes, the kernel tile and work lists on the flash backends, the split
  // decisions (options.split_keys), the workspace. Reads nothing on the
  // device and enqueues nothing.
  AttentionPlan plan(const Queue& queue, const PrefillMetadata& metadata, const PlanOptions& options = {}) const;
  // The same from metadata that lives on the device: the flash backends read
  // nothing back (their kernels cover max_seqlen_q tiles of every sequence
  // and skip the empty ones), so plan, upload and runs can be captured into
  // a CUDA graph; other backends read the arrays back through `queue` (one
  // wait on a GPU queue, none on the host queue).
  AttentionPlan plan(Queue& queue, const DevicePrefillMetadata& metadata, const PlanOptions& options = {}) const;
  // Copies plan.workspace_words to the start of `workspace` through `queue`
  // (nothing when there are none). Raises Error(invalid_argument) unless the
  // workspace holds plan.workspace_bytes at 64-byte alignment.
  void upload_plan(Queue& queue, const AttentionPlan& plan, const Workspace& workspace) const;

  // Causal (metadata.causal) varlen attention of the new tokens, softmax of
  // `scale` * q.k (finite). Results go into `out` [Nq, H, V] and `lse` [H, Nq]
  // float32 when the caller passes them (any strides; `lse` needs
  // return_lse) and are allocated on `queue` otherwise, so a caller that
  // passes both allocates nothing. `plan` must be this backend's (or one of
  // the same name and params) for `queue`'s device, its words uploaded to
  // `workspace`.
  // With float8_e4m3 inputs, `descales` gives q's, k's and v's (all 1 when
  // absent); other dtypes take none. `mask` limits the keys each query sees
  // and adds sinks (docs/contract.md §12); a backend that takes none
  // (takes_attention_masks) refuses a non-empty one with
  // Error(not_supported).
  AttentionResult run_new_tokens(Queue& queue, const AttentionPlan& plan, const Workspace& workspace,
                                 const TensorView& q, const TensorView& k, const TensorView& v, float scale,
                                 bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<OutputScale> out_scale = std::nullopt,
                                 std::optional<TensorView> lse = std::nullopt,
                                 const std::optional<InputDescales>& descales = std::nullopt,
                                 const AttentionMask& mask = {}) const;
  // Non-causal attention of every query against context chunk `chunk_index`;
  // always returns the LSE. Rows whose sequence has no keys: 0 and -inf.
  // `out` (the backend's output dtype), `lse`, `descales` and `mask` as for
  // run_new_tokens.
  AttentionResult run_context_chunk(Queue& queue, const AttentionPlan& plan, const Workspace& workspace,
                                    int chunk_index, const TensorView& q, const TensorView& k, const TensorView& v,
                                    float scale, std::optional<TensorView> out = std::nullopt,
                                    std::optional<TensorView> lse = std::nullopt,
                                    const std::optional<InputDescales>& descales = std::nullopt,
                                    const AttentionMask& mask = {}) const;

  // Joins two partial attentions (docs/contract.md §3). Needs no plan.
  virtual void merge_attn_states(Queue& queue, const MergeArgs& args) const = 0;

  // Whether the attention calls take a non-empty AttentionMask and the merge
  // sinks (docs/contract.md §12): every built-in backend today. The others
  // (plugins) refuse them with Error(not_supported) and write nothing.
  virtual bool takes_attention_masks() const { return false; }

  // ---- The prepared step: a convenience over one plan (vLLM's interface). ----

  // Plans `metadata` (no split-KV), uploads the plan into a workspace the
  // backend keeps (reused while large enough and every run was on the
  // upload's stream) and holds both until the next prepare. Must be called
  // before the run_* calls below.
  void prepare(Queue& queue, const PrefillMetadata& metadata);
  // The same from metadata that lives on the device (plan's second form).
  void prepare_device(Queue& queue, const DevicePrefillMetadata& metadata);
  // The held plan's host metadata; raises Error(invalid_argument) before
  // prepare() and after prepare_device() on a backend that kept no host copy.
  const PrefillMetadata& metadata() const;
  // The held plan (raises before prepare).
  const AttentionPlan& prepared_plan() const;
  // The planned calls with the held plan and workspace; a run on another
  // stream than the upload's is ordered after it on the device.
  AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                 float scale, bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<OutputScale> out_scale = std::nullopt,
                                 std::optional<TensorView> lse = std::nullopt,
                                 const std::optional<InputDescales>& descales = std::nullopt,
                                 const AttentionMask& mask = {});
  AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                    const TensorView& v, float scale, std::optional<TensorView> out = std::nullopt,
                                    std::optional<TensorView> lse = std::nullopt,
                                    const std::optional<InputDescales>& descales = std::nullopt,
                                    const AttentionMask& mask = {});

  // ---- The MLA step's gather and up-projection, and descriptions. ----

  // The dtype of the latents run_mla_prefill passes from gather_latents to
  // project_latents for keys and values of `compute`: float32 by default;
  // the GPU flash backends take bfloat16 and float16 latents in that dtype,
  // since their projections round every latent to it anyway (the same bits,
  // half the bytes, and cuBLASLt reads them in place). Every backend accepts
  // float32 latents.
  virtual DType latent_dtype(DType compute) const;

  // The MLA step's gather (run_mla_prefill; mla/backend/latents.hpp): latents[t] =
  // row t's L latent values in float32, or rounded to the latents' dtype
  // where latent_dtype allows another (times gather.scale when read from
  // the cache), and k[t, h, P:P+R] = its rope key, for every head h, in k's
  // dtype. The default runs on the host and needs a host queue (else
  // Error(not_supported)); the flash backends launch a kernel on theirs.
  virtual void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                              const TensorView& k) const;
  // The up-projection: for head h, k[t, h, :P] = latents[t] . kv_b_proj[h*(P+V) + j]
  // over j < P and v[t, h, :] the same over the V rows after them, summed
  // in float32 in order of the latent index. Default as for gather_latents.
  virtual void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                               const TensorView& k, const TensorView& v) const;
  // The MLA step's FP8 attention mode (docs/contract.md §4): to[t, h, d] =
  // e4m3(from[t, h, d] / s), saturating at +-448 (the conversion of fp8
  // output), for `from` [T, H, D] in a float dtype and `to` float8_e4m3 of
  // that shape; s = `scale` when given, else the largest |from| / 448 (1 when
  // every value is 0). `scratch`: two 4-byte words in memory the queue
  // reaches, where s is found on the queue when `scale` is absent. Returns s
  // as the attention call's descale: the host float, or a float32 tensor over
  // scratch[1], read when that call runs. Default as for gather_latents; the
  // flash backends launch kernels on theirs.
  virtual Descale quantise_e4m3(Queue& queue, const TensorView& from, const TensorView& to, std::optional<float> scale,
                                float* scratch) const;

  virtual bool supports_quant_output(QuantKey key) const;

  // What runs under the name, for reports and benchmarks (e.g. which ISA
  // variant of the KOKKOS kernel this CPU gets); empty when there is nothing
  // to add. Never raises: a problem is described in the text instead.
  virtual std::string kernel_info() const { return {}; }

 protected:
  // What a backend supplies. check_queue runs first in every planned call
  // and plan (`operation` names it): Error(not_supported) for a queue the
  // backend cannot use. The default accepts any queue.
  virtual void check_queue(const Queue& queue, const char* operation) const;
  // Plans checked host metadata. The default fills the sizes and lengths
  // and needs no workspace: right for backends that read the lengths on the
  // host at run time.
  virtual AttentionPlan make_plan(const Queue& queue, const PrefillMetadata& metadata,
                                  const PlanOptions& options) const;
  // Plans checked device metadata. The default reads the arrays back
  // (read_device_metadata) and calls make_plan.
  virtual AttentionPlan make_device_plan(Queue& queue, const DevicePrefillMetadata& metadata,
                                         const PlanOptions& options) const;
  // One attention call whose arguments passed the shared checks.
  virtual void attend(Queue& queue, const AttentionCall& call) const = 0;

 private:
  // The shared checks, the outputs, then attend(). `chunk_call`: a context
  // chunk's call, whose index is checked before attend reads chunk < 0 as
  // the new tokens.
  AttentionResult run_call(Queue& queue, AttentionCall& call, bool chunk_call, bool return_lse,
                           std::optional<TensorView> out, std::optional<TensorView> lse) const;
  void hold(Queue& queue, AttentionPlan plan);
  // Orders a convenience run on `queue` after the held plan's upload.
  void order_after_upload(Queue& queue);

  BackendParams params_;
  // The prepared step (the convenience only): the plan, the workspace its
  // words were uploaded to, and the queue of the upload.
  struct Prepared;
  std::shared_ptr<Prepared> prepared_;
};

using BackendFactory = std::function<std::unique_ptr<PrefillBackend>(const BackendParams&)>;

// A registry entry: the description and how to build one.
struct BackendEntry {
  BackendDescription description;
  BackendFactory factory;
};

// One whole prefill step, what vLLM's forward_mha does: attention of the new
// tokens (causal), then of every context chunk, merged in turn, each with
// softmax scale `scale`. `chunk_k` / `chunk_v` hold one view per metadata
// chunk. Returns [Nq, H, V] output and
// [H, Nq] LSE, equal to one attention pass over context + new tokens. This
// form allocates its results and workspace on `queue`; the one below does not.
// With float8_e4m3 inputs, `descales` holds q's and the keys' and values'
// descales, the same for the new tokens and every chunk. `mask`'s top-k bits
// and window apply to every call (its positions span context and new keys);
// its sinks are applied once, by the last merge (or the new tokens' call
// when there are no chunks), so the result equals one masked pass with sinks
// (docs/contract.md §12).
AttentionResult run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata,
                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                 const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v,
                                 float scale, const std::optional<InputDescales>& descales = std::nullopt,
                                 const AttentionMask& mask = {});

// Where a prefill step writes, all memory of the caller's (device memory of
// the queue, or anything the queue can access).
struct PrefillStepBuffers {
  TensorView out;             // [Nq, H, V] in the backend's output dtype, required
  TensorView lse;             // [H, Nq] float32; empty view: not wanted
  void* workspace = nullptr;  // prefill_step_workspace_size() bytes, 64-byte aligned
  std::size_t workspace_bytes = 0;
};

// The fewest query rows a flash backend's tile has (a warp's 16 rows):
// attention_workspace_size counts work lists at this tile height.
inline constexpr int min_planned_query_tile_rows = 16;

// Bytes `words` 32-bit plan words take at the start of a plan's workspace:
// rounded up to 256, where what follows them (the split-KV partials) starts.
// attention_workspace_size and the flash backends' plans both count so.
inline constexpr std::size_t plan_words_bytes(std::size_t words) {
  return (words * sizeof(std::int32_t) + 255) / 256 * 256;
}

// Bytes of workspace enough for any built-in backend's plan of `metadata`
// with `options` (AttentionPlan::workspace_bytes is never more): the words
// of the flash backends' cu_seqlens and work lists at their smallest query
// tile, and the split-KV partials (attention_scratch_size) with
// options.split_keys. It depends on the batch size, the token count and the
// number of chunks only, so host and device metadata of one step get the
// same figure (a device plan uses no words: its kernels read the caller's
// arrays).
std::size_t attention_workspace_size(const BackendParams& params, const PrefillMetadata& metadata,
                                     const PlanOptions& options = {});
std::size_t attention_workspace_size(const BackendParams& params, const DevicePrefillMetadata& metadata,
                                     const PlanOptions& options = {});

// Bytes of workspace run_prefill_step needs for `metadata`: the attention
// plan's (attention_workspace_size, with split-KV when there are context
// chunks), an LSE of the new tokens (the merges need one when the caller
// wants none) and, with context chunks, the chunk results and the merges'
// second buffer.
std::size_t prefill_step_workspace_size(const BackendParams& params, const PrefillMetadata& metadata);
std::size_t prefill_step_workspace_size(const BackendParams& params, const DevicePrefillMetadata& metadata);

// The step without allocating: plans it (split-KV when there are context
// chunks), uploads the plan into the workspace and runs every call into
// `buffers`, leaving the backend's prepared step alone. On a steady stream
// of steps it makes no allocation and waits for nothing on the host.
void run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers,
                      const std::optional<InputDescales>& descales = std::nullopt, const AttentionMask& mask = {});

// The same with metadata on the device, planned from it: on the
// flash backends, with a borrowed stream and buffers of the caller's, the
// whole step only enqueues kernels, so it can be captured into a CUDA graph
// and replayed after the engine rewrites the arrays and tensors in place
// (same sizes).
void run_prefill_step(PrefillBackend& backend, Queue& queue, const DevicePrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers,
                      const std::optional<InputDescales>& descales = std::nullopt, const AttentionMask& mask = {});

}  // namespace mla
