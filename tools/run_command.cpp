// mla-prefill run: one varlen attention call on tensors from .npy files,
// through the selected backend, with tensors moved only through its queue.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <iostream>

#include "command.hpp"
#include "mla/attention_mask.hpp"
#include "mla/backend/checks.hpp"
#include "mla/platform.hpp"
#include "npy.hpp"

namespace mla::tools {
namespace {

struct RunOptions {
  SelectionOptions selection;
  std::string q, k, v, cu_seqlens_q, cu_seqlens_k, out;
  std::optional<std::string> lse;
  float scale = 0.0f;
  bool causal = false;
  std::string dtype = "bf16";
  std::optional<std::string> dims;
  // docs/contract.md §12: [Nq, k] key positions per query (-1 ignored), a
  // window, [H] sink logits.
  std::optional<std::string> topk_indices;
  std::int64_t window = 0;
  std::optional<std::string> sinks;
};

// The call's mask on `queue`: the index lists as vLLM's bit rows, the window
// and the sinks; `words` and `sinks` keep the uploaded memory.
struct QueueMask {
  UsmBuffer words;
  OwnedTensor sinks;
  AttentionMask mask;
};

QueueMask load_mask(const RunOptions& options, const PrefillMetadata& metadata, Queue& queue, std::int64_t heads) {
  QueueMask q;
  q.mask.window = options.window;
  if (options.topk_indices) {
    const NpyArray array = read_npy(*options.topk_indices);
    if (array.rank() != 2 || array.shape[0] != metadata.num_q_tokens()) {
      raise(ErrorCategory::invalid_argument, "--topk-indices must be [Nq, k] = [" +
                                                 std::to_string(metadata.num_q_tokens()) + ", k] key positions; got " +
                                                 array.describe());
    }
    std::vector<std::int32_t> indices;
    for (const std::int64_t value : array.to_integers("--topk-indices")) {
      if (value < -1 || value > INT32_MAX) {
        raise(ErrorCategory::invalid_argument,
              "--topk-indices holds " + std::to_string(value) + "; positions are -1 (none) or 0 to 2^31-1");
      }
      indices.push_back(static_cast<std::int32_t>(value));
    }
    const HostTopkMask bits = HostTopkMask::from_indices(metadata, indices.data(), array.shape[1], array.shape[1]);
    const TopkMask view = bits.view();
    const auto bytes = static_cast<std::size_t>(view.batch_size * view.batch_stride) * sizeof(std::uint32_t);
    q.words = UsmBuffer::device(queue, std::max<std::size_t>(bytes, 64));
    queue.memcpy(q.words.get(), view.words, bytes);
    q.mask.topk =
        TopkMask::contiguous(q.words.as<const std::uint32_t>(), view.batch_size, view.rows, view.words_per_row,
                             queue.backend() == DeviceBackend::host ? MemoryKind::host : MemoryKind::device);
  }
  if (options.sinks) {
    const NpyArray array = read_npy(*options.sinks);
    if (array.rank() != 1 || array.shape[0] != heads) {
      raise(ErrorCategory::invalid_argument,
            "--sinks must be [H] = [" + std::to_string(heads) + "] float32 sink logits; got " + array.describe());
    }
    q.sinks = upload(queue, array.to_floats("--sinks"), DType::float32, {heads});
    q.mask.sinks = q.sinks.view;
  }
  queue.wait();
  return q;
}

// The split of dqk = P + R. Without --dims, R is 64 (DeepSeek's rope width)
// when dqk > 64, else half of dqk; the split only matters for backends that
// list supported dims.
MlaDims resolve_dims(const RunOptions& options, std::int64_t dqk, std::int64_t dv) {
  if (!options.dims) {
    const std::int64_t rope = dqk > 64 ? 64 : dqk / 2;
    return MlaDims{static_cast<int>(dqk - rope), static_cast<int>(rope), static_cast<int>(dv)};
  }
  const MlaDims dims = parse_dims(*options.dims, "--dims");
  if (dims.qk_head_dim() != dqk || dims.v_head_dim != dv) {
    raise(ErrorCategory::invalid_argument,
          "--dims " + *options.dims + " gives dqk=" + std::to_string(dims.qk_head_dim()) +
              ", V=" + std::to_string(dims.v_head_dim) + " but the tensors have dqk=" + std::to_string(dqk) +
              " (last dim of --q) and V=" + std::to_string(dv) + " (last dim of --v)");
  }
  return dims;
}

void check_shapes(const HostTensor& q, const HostTensor& k, const HostTensor& v) {
  const auto mismatch = [](const std::string& message) { raise(ErrorCategory::invalid_argument, message); };
  if (q.size(1) != k.size(1) || q.size(1) != v.size(1)) {
    mismatch("heads disagree: --q has " + std::to_string(q.size(1)) + ", --k " + std::to_string(k.size(1)) + ", --v " +
             std::to_string(v.size(1)));
  }
  if (q.size(2) != k.size(2)) {
    mismatch("dqk disagrees: --q rows have " + std::to_string(q.size(2)) + " elements, --k rows " +
             std::to_string(k.size(2)));
  }
  if (k.size(0) != v.size(0)) {
    mismatch("--k has " + std::to_string(k.size(0)) + " tokens but --v has " + std::to_string(v.size(0)));
  }
  if (q.size(1) == 0 || q.size(2) == 0 || v.size(2) == 0) {
    mismatch("heads, dqk and V must be positive, got q " + std::to_string(q.size(1)) + " heads x " +
             std::to_string(q.size(2)) + ", V " + std::to_string(v.size(2)));
  }
}

int run_attention(const RunOptions& options) {
  // Validate everything the user gave before choosing a backend.
  const DType dtype = parse_dtype_and_scale(options.dtype, options.scale);
  check_distinct_outputs({{"--out", options.out}, {"--lse", options.lse}});
  const HostTensor q = load_float_tensor(options.q, "--q", 3, "[tokens, heads, dqk]");
  const HostTensor k = load_float_tensor(options.k, "--k", 3, "[tokens, heads, dqk]");
  const HostTensor v = load_float_tensor(options.v, "--v", 3, "[tokens, heads, V]");
  check_shapes(q, k, v);
  const MlaDims dims = resolve_dims(options, q.size(2), v.size(2));

  PrefillMetadata metadata;
  metadata.cu_seqlens_q = load_cu_seqlens(options.cu_seqlens_q, "--cu-seqlens-q");
  metadata.cu_seqlens_k = load_cu_seqlens(options.cu_seqlens_k, "--cu-seqlens-k");
  check_cu_seqlens(metadata.cu_seqlens_q, "--cu-seqlens-q", q.size(0));
  check_cu_seqlens(metadata.cu_seqlens_k, "--cu-seqlens-k", k.size(0));
  if (metadata.cu_seqlens_q.size() != metadata.cu_seqlens_k.size()) {
    raise(ErrorCategory::invalid_argument, "--cu-seqlens-q has " + std::to_string(metadata.cu_seqlens_q.size()) +
                                               " entries but --cu-seqlens-k has " +
                                               std::to_string(metadata.cu_seqlens_k.size()) + "; both are [batch + 1]");
  }
  metadata.max_seqlen_q = max_seqlen(metadata.cu_seqlens_q);
  metadata.max_seqlen_k = max_seqlen(metadata.cu_seqlens_k);
  metadata.causal = options.causal;
  check_metadata(metadata);

  Selector selector = options.selection.make_selector();
  BackendParams params;
  params.num_heads = static_cast<int>(q.size(1));
  params.dims = dims;
  params.dtype = dtype;
  auto [selection, backend, queue] = choose_backend(selector, params, current_platform());

  const std::int64_t heads = q.size(1);
  OwnedTensor q_dev = upload(queue, q.values, dtype, {q.size(0), heads, q.size(2)});
  OwnedTensor k_dev = upload(queue, k.values, dtype, {k.size(0), heads, k.size(2)});
  OwnedTensor v_dev = upload(queue, v.values, dtype, {v.size(0), heads, v.size(2)});
  const QueueMask mask = load_mask(options, metadata, queue, heads);
  backend->prepare(queue, metadata);
  const bool want_lse = options.lse.has_value();
  const AttentionResult result =
      backend->run_new_tokens(queue, q_dev.view, k_dev.view, v_dev.view, options.scale, want_lse, std::nullopt,
                              std::nullopt, std::nullopt, std::nullopt, mask.mask);
  queue.wait();

  save_float_tensor(options.out, {q.size(0), heads, v.size(2)}, download(queue, result.out));
  if (want_lse) save_float_tensor(*options.lse, {heads, q.size(0)}, download(queue, result.lse));
  std::cout << "mla-prefill: ran " << backend->name() << " on the " << queue.describe() << " (" << selection.why
            << "): " << metadata.batch_size() << " sequences, " << q.size(0) << " queries, " << k.size(0) << " keys, "
            << heads << " heads, " << dtype_name(dtype) << ", " << to_string(dims)
            << (options.causal ? ", causal" : ", non-causal") << (options.topk_indices ? ", top-k mask" : "")
            << (options.window != 0 ? ", window " + std::to_string(options.window) : std::string())
            << (options.sinks ? ", sinks" : "") << '\n';
  return exit_success;
}

}  // namespace

Command add_run_command(CLI::App& parent) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", "Run varlen prefill attention on .npy tensors and write the output");
  options->selection.add_to(*app);
  app->add_option("--q", options->q, "queries [Nq, H, dqk], float32 or float16 .npy")->required();
  app->add_option("--k", options->k, "keys [Nk, H, dqk]")->required();
  app->add_option("--v", options->v, "values [Nk, H, V]")->required();
  app->add_option("--cu-seqlens-q", options->cu_seqlens_q, "[B+1] int32 or int64 .npy, from 0 to Nq")->required();
  app->add_option("--cu-seqlens-k", options->cu_seqlens_k, "[B+1] int32 or int64 .npy, from 0 to Nk")->required();
  app->add_option("--scale", options->scale, "softmax scale, e.g. 192^-0.5")->required();
  app->add_flag("--causal", options->causal,
                "causal mask, bottom-right aligned when a sequence has more keys than queries");
  app->add_option("--dtype", options->dtype, "compute type; inputs are rounded to it: bf16, fp16 or fp32")
      ->capture_default_str();
  add_optional(*app, "--dims", options->dims,
               "MLA dims P,R,V; default: V from --v, R = 64 when dqk > 64 else dqk / 2, P = dqk - R");
  app->add_option("--out", options->out, "output [Nq, H, V], written as float32 .npy")->required();
  add_optional(*app, "--lse", options->lse, "also write the LSE [H, Nq] (natural log, float32 .npy)");
  add_optional(*app, "--topk-indices", options->topk_indices,
               "[Nq, k] int32/int64 .npy: the key positions each query may see (-1: none), as DeepSeek-V3.2's "
               "indexer picks them (docs/contract.md §12)");
  app->add_option("--window", options->window, "sliding window: each query sees its last W keys (0: none)")
      ->capture_default_str();
  add_optional(*app, "--sinks", options->sinks, "[H] float32 .npy: each head's sink logit (-inf: none)");
  return {app, [options] { return run_attention(*options); }};
}

}  // namespace mla::tools
