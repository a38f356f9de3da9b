#include "cublaslt_projection.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "mla/config.hpp"
#include "projection.hpp"

namespace mla::cuda_flash {
namespace {

// Tokens per pass unless MLA_CUBLASLT_PASS_TOKENS says otherwise: the
// scratch holds this many rows of latents, and the algorithm is chosen for
// this count and used for every count.
constexpr int default_pass_tokens = 16384;
// cuBLASLt workspace in MiB unless MLA_CUBLASLT_WORKSPACE_MIB says otherwise
// (0: none). Algorithms that would split K are refused whatever it offers.
constexpr int default_workspace_mib = 0;
// Heuristic answers asked for; those without split-K are the candidates.
constexpr int heuristic_candidates = 8;
// A pass of at least this many tokens (or a whole pass) times the candidates.
constexpr std::int64_t tuning_tokens = 4096;
// Timed runs per candidate.
constexpr int tuning_runs = 3;
// Shapes and layouts remembered per backend; a step uses one or two.
constexpr std::size_t max_plans = 16;

void check_lt(cublasStatus_t status, std::string_view call, std::string_view context) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  raise(ErrorCategory::device, std::string(call) + " failed: " + cublasLtGetStatusName(status) + ", " +
                                   cublasLtGetStatusString(status) + " (" + std::string(context) + ")");
}

template <class Raw, cublasStatus_t (*destroy)(Raw)>
struct LtDeleter {
  void operator()(Raw raw) const noexcept { (void)destroy(raw); }
};
template <class Raw, cublasStatus_t (*destroy)(Raw)>
using LtPtr = std::unique_ptr<std::remove_pointer_t<Raw>, LtDeleter<Raw, destroy>>;

using Handle = LtPtr<cublasLtHandle_t, cublasLtDestroy>;
using MatmulDesc = LtPtr<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = LtPtr<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = LtPtr<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <class T>
void set_layout(const Layout& layout, cublasLtMatrixLayoutAttribute_t attribute, T value, std::string_view context) {
  check_lt(cublasLtMatrixLayoutSetAttribute(layout.get(), attribute, &value, sizeof value),
           "cublasLtMatrixLayoutSetAttribute", context);
}

// A column-major [rows, cols] matrix with leading dim `ld`, `batch` of them `batch_stride` elements apart.
Layout make_layout(cudaDataType_t type, std::int64_t rows, std::uint64_t cols, std::int64_t ld, std::int64_t batch,
                   std::int64_t batch_stride, std::string_view context) {
  cublasLtMatrixLayout_t raw = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&raw, type, static_cast<std::uint64_t>(rows), cols, ld),
           "cublasLtMatrixLayoutCreate", context);
  Layout layout(raw);
  set_layout(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<std::int32_t>(batch), context);
  set_layout(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride, context);
  return layout;
}

// The largest power of two up to 256 dividing every byte count: the
// alignment the heuristic may assume of a matrix's start, columns and batches.
std::uint32_t alignment(std::initializer_list<std::uint64_t> bytes) {
  std::uint32_t a = 256;
  for (std::uint64_t b : bytes) {
    while (a > 1 && b % a != 0) a /= 2;
  }
  return a;
}

std::uint64_t address(const void* ptr) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr)); }

// One head-batched GEMM's operands: A the weight rows, C (= D) the outputs.
struct Operands {
  std::int64_t rows = 0;  // P for keys, V for values
  const std::byte* weight = nullptr;
  void* out = nullptr;
  std::int64_t out_ld = 0, out_head_stride = 0;
};

// What decides the descriptors and the algorithm (the token count does not).
struct ShapeKey {
  DType dtype = DType::bfloat16;
  std::int64_t heads = 0, latent = 0, per_head = 0, weight_ld = 0;
  std::int64_t latent_ld = 0;  // the latents' token stride: in place, or L in the scratch
  std::uint32_t latent_alignment = 0;
  std::array<std::int64_t, 2> rows{}, out_ld{}, out_head_stride{};
  std::array<std::uint32_t, 2> weight_alignment{}, out_alignment{};
  bool operator==(const ShapeKey&) const = default;
};

struct Choice {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspace;  // bytes the algorithm needs
};

struct Gemm {
  Layout a, b, c;  // c serves as C and D
  // The heuristic's answers without split-K, in its order; `chosen` runs.
  std::vector<Choice> candidates;
  std::size_t chosen = 0;
};

struct Plan {
  ShapeKey key;
  MatmulDesc desc;
  std::array<Gemm, 2> gemms;  // keys, values
  bool tuned = false;         // the candidates were timed
  // Why cuBLASLt has no algorithm for the shape (empty: it has): kept, so
  // that every later call is refused at once with the same message.
  std::string refusal;
};

cudaDataType_t data_type(DType dtype) { return dtype == DType::float16 ? CUDA_R_16F : CUDA_R_16BF; }

struct EventDeleter {
  void operator()(cudaEvent_t event) const noexcept { (void)cudaEventDestroy(event); }
};
using EventPtr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;

}  // namespace

struct CublasLtProjection::State {
  int device = -1;
  Handle handle;
  // Read with the handle, kept for the backend's life.
  std::int64_t pass_tokens = default_pass_tokens;
  std::size_t workspace_bytes = 0;
  UsmBuffer scratch;  // the candidates' fingerprints, the workspace, then float32 latents converted (project())
  std::vector<std::unique_ptr<Plan>> plans;
  // Recorded after the last call's GEMMs on last_stream (unless that call
  // was captured into a graph, whose launches the caller orders): a call on
  // another stream waits for it before overwriting the scratch.
  EventPtr last_use;
  cudaStream_t last_stream = nullptr;
  bool last_use_recorded = false;
};

namespace {

// The heuristic's answers that run without split-K within `workspace`
// bytes, in its order; empty when there is none.
std::vector<Choice> candidates(cublasLtHandle_t handle, const Plan& plan, const Gemm& gemm, int index,
                               std::size_t workspace, std::string_view context) {
  cublasLtMatmulPreference_t raw = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&raw), "cublasLtMatmulPreferenceCreate", context);
  const Preference preference(raw);
  const auto set = [&](cublasLtMatmulPreferenceAttributes_t attribute, auto value) {
    check_lt(cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &value, sizeof value),
             "cublasLtMatmulPreferenceSetAttribute", context);
  };
  const auto idx = static_cast<std::size_t>(index);
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace));
  set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, plan.key.weight_alignment[idx]);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, plan.key.latent_alignment);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, plan.key.out_alignment[idx]);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, plan.key.out_alignment[idx]);
  std::array<cublasLtMatmulHeuristicResult_t, heuristic_candidates> results{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, plan.desc.get(), gemm.a.get(), gemm.b.get(), gemm.c.get(), gemm.c.get(),
                                     preference.get(), heuristic_candidates, results.data(), &found);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) check_lt(status, "cublasLtMatmulAlgoGetHeuristic", context);
  std::vector<Choice> usable;
  for (int i = 0; i < found && status == CUBLAS_STATUS_SUCCESS; ++i) {
    const cublasLtMatmulHeuristicResult_t& result = results[static_cast<std::size_t>(i)];
    if (result.state != CUBLAS_STATUS_SUCCESS || result.workspaceSize > workspace) continue;
    std::uint32_t split_k = 1;
    std::size_t written = 0;
    check_lt(cublasLtMatmulAlgoConfigGetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k,
                                                  sizeof split_k, &written),
             "cublasLtMatmulAlgoConfigGetAttribute", context);
    if (split_k <= 1) usable.push_back({result.algo, result.workspaceSize});
  }
  return usable;
}

std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const ShapeKey& key, std::int64_t pass_tokens,
                                std::size_t workspace, std::string_view context) {
  auto plan = std::make_unique<Plan>();
  plan->key = key;
  cublasLtMatmulDesc_t raw = nullptr;
  check_lt(cublasLtMatmulDescCreate(&raw, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", context);
  plan->desc.reset(raw);
  const auto set = [&](cublasLtMatmulDescAttributes_t attribute, cublasOperation_t op) {
    const auto value = static_cast<std::int32_t>(op);
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc.get(), attribute, &value, sizeof value),
             "cublasLtMatmulDescSetAttribute", context);
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  const cudaDataType_t type = data_type(key.dtype);
  for (std::size_t i = 0; i < 2; ++i) {
    Gemm& gemm = plan->gemms[i];
    gemm.a = make_layout(type, key.latent, static_cast<std::uint64_t>(key.rows[i]), key.weight_ld, key.heads,
                         key.per_head * key.weight_ld, context);
    const auto tokens = static_cast<std::uint64_t>(pass_tokens);
    gemm.b = make_layout(type, key.latent, tokens, key.latent_ld, key.heads, 0, context);
    gemm.c = make_layout(type, key.rows[i], tokens, key.out_ld[i], key.heads, key.out_head_stride[i], context);
    gemm.candidates = candidates(handle, *plan, gemm, static_cast<int>(i), workspace, context);
    if (gemm.candidates.empty()) {
      plan->refusal = "cuBLASLt has no algorithm without split-K within " + std::to_string(workspace) +
                      " bytes of workspace for the " + (i == 0 ? "keys'" : "values'") + " GEMM (" +
                      std::string(context) + ")";
      return plan;
    }
  }
  return plan;
}

}  // namespace

CublasLtProjection::CublasLtProjection() : state_(std::make_unique<State>()) {}
CublasLtProjection::~CublasLtProjection() = default;

void CublasLtProjection::project(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                                 const TensorView& k, const TensorView& v) {
  const std::int64_t tokens = latents.size(0), latent = latents.size(1), heads = k.size(1);
  if (tokens == 0) return;
  const std::int64_t per_head = kv_b_proj.size(0) / heads, p = per_head - v.size(2);
  const std::string context = "cuBLASLt up-projection of " + std::to_string(tokens) + " tokens into " + k.describe();
  gpu::DeviceGuard guard(queue.device_index(), context);
  State& s = *state_;
  if (!s.handle || s.device != queue.device_index()) {
    s = State{};
    s.pass_tokens = gpu::whole_number_setting("MLA_CUBLASLT_PASS_TOKENS", 256, 1 << 16, default_pass_tokens);
    const int mib = gpu::whole_number_setting("MLA_CUBLASLT_WORKSPACE_MIB", 0, 1024, default_workspace_mib);
    s.workspace_bytes = static_cast<std::size_t>(mib) << 20;
    cublasLtHandle_t raw = nullptr;
    check_lt(cublasLtCreate(&raw), "cublasLtCreate", context);
    s.handle.reset(raw);
    cudaEvent_t event = nullptr;
    gpu::check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "EventCreateWithFlags", context);
    s.last_use.reset(event);
    s.device = queue.device_index();
  }
  const cudaStream_t stream = gpu::stream_of(queue);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  gpu::check(cudaStreamIsCapturing(stream, &capture), "StreamIsCapturing", context);
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  if (s.last_use_recorded && s.last_stream != stream) {
    gpu::check(cudaStreamWaitEvent(stream, s.last_use.get(), capturing ? cudaEventWaitExternal : 0u), "StreamWaitEvent",
               context);
  }
  const auto element = static_cast<std::uint64_t>(dtype_size(k.dtype));
  const std::int64_t weight_ld = kv_b_proj.stride[0];
  const auto* weight = static_cast<const std::byte*>(kv_b_proj.data);
  const std::array<Operands, 2> operands = {
      Operands{p, weight, k.data, k.stride[0], k.stride[1]},
      Operands{v.size(2), weight + static_cast<std::uint64_t>(p * weight_ld) * element, v.data, v.stride[0],
               v.stride[1]}};
  ShapeKey key;
  key.dtype = k.dtype;
  key.heads = heads;
  key.latent = latent;
  key.per_head = per_head;
  key.weight_ld = weight_ld;
  // Latents in the compute dtype are read in place; float32 ones are
  // converted into the scratch (256-byte aligned, rows of L).
  const bool in_place = latents.dtype == k.dtype;
  key.latent_ld = in_place ? latents.stride[0] : latent;
  key.latent_alignment = in_place
                             ? alignment({address(latents.data), static_cast<std::uint64_t>(key.latent_ld) * element})
                             : alignment({static_cast<std::uint64_t>(latent) * element});
  for (std::size_t i = 0; i < 2; ++i) {
    const Operands& o = operands[i];
    key.rows[i] = o.rows;
    key.out_ld[i] = o.out_ld;
    key.out_head_stride[i] = o.out_head_stride;
    key.weight_alignment[i] = alignment({address(o.weight), static_cast<std::uint64_t>(weight_ld) * element,
                                         static_cast<std::uint64_t>(per_head * weight_ld) * element});
    key.out_alignment[i] = alignment({address(o.out), static_cast<std::uint64_t>(o.out_ld) * element,
                                      static_cast<std::uint64_t>(o.out_head_stride) * element});
  }
  Plan* plan = nullptr;
  for (const auto& known : s.plans) {
    if (known->key == key) plan = known.get();
  }
  if (plan == nullptr) {
    if (s.plans.size() == max_plans) s.plans.erase(s.plans.begin());
    s.plans.push_back(make_plan(s.handle.get(), key, s.pass_tokens, s.workspace_bytes, context));
    plan = s.plans.back().get();
  }
  if (!plan->refusal.empty()) raise(ErrorCategory::not_supported, plan->refusal);
  // One allocation in the backend's life (per device, latent width and
  // whether float32 latents came): the candidates' fingerprints, then the
  // workspace, then (for float32 latents) passes of at most pass_tokens
  // converted latents, each part at a 256-byte boundary.
  const std::size_t workspace_at = 256, latents_at = workspace_at + s.workspace_bytes;
  const std::size_t scratch_bytes =
      latents_at + (in_place ? 0 : static_cast<std::size_t>(s.pass_tokens * latent) * dtype_size(k.dtype));
  if (s.scratch.bytes() < scratch_bytes) {
    // Work in flight on another stream may still read the old scratch; the
    // free waits for it (cudaFree synchronises).
    s.scratch = UsmBuffer();
    s.scratch = UsmBuffer::device(queue, scratch_bytes);
  }

  const float alpha = 1.0f, beta = 0.0f;
  auto* fingerprints = static_cast<std::uint64_t*>(s.scratch.get());
  std::byte* workspace = static_cast<std::byte*>(s.scratch.get()) + workspace_at;
  std::byte* converted = static_cast<std::byte*>(s.scratch.get()) + latents_at;
  // The pass's latents: in place, or converted into the scratch.
  const auto pass_latents = [&](std::int64_t t0) -> const void* {
    if (!in_place) return converted;
    return static_cast<const std::byte*>(latents.data) + static_cast<std::uint64_t>(t0 * latents.stride[0]) * element;
  };
  // GEMM i of a pass of n tokens from t0 with one candidate.
  const auto matmul = [&](std::size_t i, const Choice& choice, std::int64_t t0) {
    Gemm& gemm = plan->gemms[i];
    void* out =
        static_cast<std::byte*>(operands[i].out) + static_cast<std::uint64_t>(t0 * operands[i].out_ld) * element;
    return cublasLtMatmul(s.handle.get(), plan->desc.get(), &alpha, operands[i].weight, gemm.a.get(), pass_latents(t0),
                          gemm.b.get(), &beta, out, gemm.c.get(), out, gemm.c.get(), &choice.algo,
                          choice.workspace != 0 ? workspace : nullptr, choice.workspace, stream);
  };
  // Times every candidate of GEMM i on the pass and keeps the fastest of
  // those whose output has the first candidate's bits: the first is the
  // heuristic's answer, which the shape, device and cuBLASLt alone decide, so
  // the timing never changes a result (docs/contract.md §6).
  const auto tune = [&](std::size_t i, std::int64_t t0, std::int64_t n) {
    Gemm& gemm = plan->gemms[i];
    TensorView out = i == 0 ? k : v;
    out.data = static_cast<std::byte*>(out.data) + static_cast<std::uint64_t>(t0 * out.stride[0]) * element;
    out.shape[0] = n;
    out.shape[2] = operands[i].rows;
    cudaEvent_t raw_start = nullptr, raw_end = nullptr;
    gpu::check(cudaEventCreate(&raw_start), "EventCreate", context);
    const EventPtr start(raw_start);
    gpu::check(cudaEventCreate(&raw_end), "EventCreate", context);
    const EventPtr end(raw_end);
    const std::size_t count = gemm.candidates.size();
    std::vector<float> ms(count, -1.0f);
    for (std::size_t c = 0; c < count; ++c) {
      const cublasStatus_t status = matmul(i, gemm.candidates[c], t0);
      if (c == 0) check_lt(status, "cublasLtMatmul (tuning)", context);
      if (status != CUBLAS_STATUS_SUCCESS) continue;  // this candidate cannot serve the pass
      fingerprint(queue, out, fingerprints + c);
      gpu::check(cudaEventRecord(start.get(), stream), "EventRecord", context);
      for (int run = 0; run < tuning_runs; ++run)
        check_lt(matmul(i, gemm.candidates[c], t0), "cublasLtMatmul", context);
      gpu::check(cudaEventRecord(end.get(), stream), "EventRecord", context);
      gpu::check(cudaEventSynchronize(end.get()), "EventSynchronize", context);
      gpu::check(cudaEventElapsedTime(&ms[c], start.get(), end.get()), "EventElapsedTime", context);
    }
    std::array<std::uint64_t, heuristic_candidates> sums{};
    gpu::check(
        cudaMemcpyAsync(sums.data(), fingerprints, count * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream),
        "MemcpyAsync", context);
    gpu::check(cudaStreamSynchronize(stream), "StreamSynchronize", context);
    std::size_t same = 0;
    for (std::size_t c = 0; c < count; ++c) {
      if (ms[c] < 0 || sums[c] != sums[0]) continue;
      ++same;
      if (ms[c] < ms[gemm.chosen]) gemm.chosen = c;
    }
    log(LogLevel::debug, std::string("cuBLASLt up-projection, ") + (i == 0 ? "keys" : "values") + ": candidate " +
                             std::to_string(gemm.chosen) + " of " + std::to_string(count) + " (" +
                             std::to_string(ms[gemm.chosen] / tuning_runs) + " ms against " +
                             std::to_string(ms[0] / tuning_runs) + " for the first on " + std::to_string(n) +
                             " tokens; " + std::to_string(same) + " gave the first's bits)");
  };
  // Latents read in place need no passes: one pass of every token.
  const std::int64_t pass = in_place ? tokens : s.pass_tokens;
  for (std::int64_t t0 = 0; t0 < tokens; t0 += pass) {
    const std::int64_t n = std::min(pass, tokens - t0);
    if (!in_place) {
      TensorView part = latents;
      part.data = static_cast<float*>(latents.data) + t0 * latents.stride[0];
      part.shape[0] = n;
      convert_latents(queue, part, converted, k.dtype);
    }
    const bool tuning = !plan->tuned && !capturing && (n >= tuning_tokens || n >= s.pass_tokens);
    for (std::size_t i = 0; i < 2; ++i) {
      Gemm& gemm = plan->gemms[i];
      set_layout(gemm.b, CUBLASLT_MATRIX_LAYOUT_COLS, static_cast<std::uint64_t>(n), context);
      set_layout(gemm.c, CUBLASLT_MATRIX_LAYOUT_COLS, static_cast<std::uint64_t>(n), context);
      if (tuning) tune(i, t0, n);
      check_lt(matmul(i, gemm.candidates[gemm.chosen], t0),
               i == 0 ? "cublasLtMatmul (keys)" : "cublasLtMatmul (values)", context);
    }
    plan->tuned = plan->tuned || tuning;
  }
  s.last_use_recorded = !capturing;
  s.last_stream = stream;
  if (!capturing) gpu::check(cudaEventRecord(s.last_use.get(), stream), "EventRecord", context);
}

}  // namespace mla::cuda_flash
