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
};

// The token counts of a prepared step, whichever form its metadata came in.
struct StepSizes {
  int batch_size = 0;
  std::int64_t num_q_tokens = 0;
  std::int64_t num_k_tokens = 0;
  std::vector<std::int64_t> chunk_k_tokens;  // one entry per context chunk
};

struct LatentGather;  // mla/backend/latents.hpp

// Splitting the keys of an attention call (the flash backends' split-KV,
// docs/contract.md §3): a call whose (query tile, head) blocks cannot fill the
// GPU cuts its keys into at most max_kv_splits ranges, writes one float32
// partial output and LSE per range into scratch the caller lends
// (PrefillBackend::lend_attention_scratch) and merges them by their LSE. The
// scratch holds splits x query-head rows, at most kv_split_row_budget rows
// in all, of v_head_dim + 1 floats each.
inline constexpr int max_kv_splits = 16;
inline constexpr std::int64_t kv_split_row_budget = 16384;

// Bytes of scratch enough for any split of a call over `num_q_tokens`
// queries: min(max_kv_splits * rows, kv_split_row_budget) rows (rows =
// num_q_tokens * num_heads) plus 256 bytes of alignment; 0 without queries.
// Never less for more queries, so scratch sized for a step serves every
// smaller one; at most kv_split_row_budget * (v_head_dim + 1) * 4 + 256 bytes
// (8.5 MB at v_head_dim 128).
std::size_t attention_scratch_size(const BackendParams& params, std::int64_t num_q_tokens);

class PrefillBackend {
 public:
  explicit PrefillBackend(const BackendParams& params);
  virtual ~PrefillBackend() = default;
  PrefillBackend(const PrefillBackend&) = delete;
  PrefillBackend& operator=(const PrefillBackend&) = delete;

  virtual std::string name() const = 0;
  const BackendParams& params() const { return params_; }

  // Checks and stores the step's metadata (and uploads it on GPU backends).
  // Must be called before run_new_tokens / run_context_chunk.
  virtual void prepare(Queue& queue, const PrefillMetadata& metadata);
  // The same from metadata that lives on the device. By default it reads the
  // arrays back (read_device_metadata: one wait on a GPU queue, none on the
  // host queue) and calls prepare(); the flash backends override it to read
  // nothing back: no copy, no allocation, no wait, so the step can be
  // captured into a CUDA graph.
  virtual void prepare_device(Queue& queue, const DevicePrefillMetadata& metadata);
  // The host metadata of the step; raises Error(invalid_argument) before
  // prepare() and after prepare_device() on a backend that kept no host copy.
  const PrefillMetadata& metadata() const;
  // The prepared step's token counts (raises before prepare).
  const StepSizes& step_sizes() const;

  // Causal (metadata.causal) varlen attention of the new tokens, softmax of
  // `scale` * q.k (finite). Results go into `out` [Nq, H, V] and `lse` [H, Nq]
  // float32 when the caller passes them (any strides; `lse` needs
  // return_lse) and are allocated on `queue` otherwise, so a caller that
  // passes both allocates nothing.
  virtual AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                         float scale, bool return_lse, std::optional<TensorView> out = std::nullopt,
                                         std::optional<OutputScale> out_scale = std::nullopt,
                                         std::optional<TensorView> lse = std::nullopt) = 0;

  // Non-causal attention of every query against context chunk `chunk_index`;
  // always returns the LSE. Rows whose sequence has no keys: 0 and -inf.
  // `out` (the backend's dtype) and `lse` as for run_new_tokens.
  virtual AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                            const TensorView& v, float scale,
                                            std::optional<TensorView> out = std::nullopt,
                                            std::optional<TensorView> lse = std::nullopt) = 0;

  // Joins two partial attentions (docs/contract.md §3).
  virtual void merge_attn_states(Queue& queue, const MergeArgs& args) = 0;

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
  virtual void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k);
  // The up-projection: for head h, k[t, h, :P] = latents[t] . kv_b_proj[h*(P+V) + j]
  // over j < P and v[t, h, :] the same over the V rows after them, summed
  // in float32 in order of the latent index. Default as for gather_latents.
  virtual void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                               const TensorView& k, const TensorView& v);

  virtual bool supports_quant_output(QuantKey key) const;

  // Lends the backend `bytes` of scratch at `data` (memory the queue's
  // device reads and writes, 16-byte aligned) for the attention calls of
  // the prepared step, until the next prepare() or prepare_device(), which
  // take it back. The flash backends split a call's keys into it
  // (attention_scratch_size) when the call's queries alone cannot fill the
  // GPU; without it they never split. Other backends ignore it.
  // run_prefill_step and run_mla_prefill lend part of their workspace.
  void lend_attention_scratch(void* data, std::size_t bytes);

  // What runs under the name, for reports and benchmarks (e.g. which ISA
  // variant of the KOKKOS kernel this CPU gets); empty when there is nothing
  // to add. Never raises: a problem is described in the text instead.
  virtual std::string kernel_info() const { return {}; }

 protected:
  // What a prepare_device override calls first: checks the sizes and
  // pointers and records the step without host arrays.
  void record_device_step(const DevicePrefillMetadata& metadata);
  // What lend_attention_scratch lent since the last prepare (null, 0: none).
  struct Scratch {
    void* data = nullptr;
    std::size_t bytes = 0;
  };
  Scratch attention_scratch() const { return scratch_; }

 private:
  BackendParams params_;
  Scratch scratch_;
  std::optional<PrefillMetadata> metadata_;
  std::optional<StepSizes> sizes_;
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
AttentionResult run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata,
                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                 const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v,
                                 float scale);

// Where a prefill step writes, all memory of the caller's (device memory of
// the queue, or anything the queue can access).
struct PrefillStepBuffers {
  TensorView out;             // [Nq, H, V] in the backend's dtype, required
  TensorView lse;             // [H, Nq] float32; empty view: not wanted
  void* workspace = nullptr;  // prefill_step_workspace_size() bytes, 64-byte aligned
  std::size_t workspace_bytes = 0;
};

// Bytes of workspace run_prefill_step needs for `metadata`: an LSE of the
// new tokens (the merges need one when the caller wants none) and, with
// context chunks, the chunk results, the merges' second buffer and the
// scratch of split attention calls (attention_scratch_size).
std::size_t prefill_step_workspace_size(const BackendParams& params, const PrefillMetadata& metadata);
std::size_t prefill_step_workspace_size(const BackendParams& params, const DevicePrefillMetadata& metadata);

// The step without allocating: prepare() (which on GPU backends reuses its
// metadata buffer once it is large enough), then every operation into
// `buffers`. On a steady stream of steps no larger than an earlier one, it
// makes no allocation and waits for nothing on the host.
void run_prefill_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers);

// The same with metadata on the device, through prepare_device(): on the
// flash backends, with a borrowed stream and buffers of the caller's, the
// whole step only enqueues kernels, so it can be captured into a CUDA graph
// and replayed after the engine rewrites the arrays and tensors in place
// (same sizes).
void run_prefill_step(PrefillBackend& backend, Queue& queue, const DevicePrefillMetadata& metadata, const TensorView& q,
                      const TensorView& k, const TensorView& v, const std::vector<TensorView>& chunk_k,
                      const std::vector<TensorView>& chunk_v, float scale, const PrefillStepBuffers& buffers);

}  // namespace mla
