// mla-prefill bench --topk K / --window W: the new tokens' causal attention
// with a key mask (docs/contract.md §12) against the same backend's dense
// causal attention on the same inputs, timed alternately in one run. The
// top-k mask is what an indexer would give: each query keeps K keys drawn at
// random from those it sees causally (all of them when it sees K or fewer).
// TFLOP/s count only the (query, key) pairs the mask lets through, as §7
// counts causal pairs; the ratio's spread is over the alternating pairs.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>

#include "bench.hpp"
#include "host_fill.hpp"
#include "mla/attention_mask.hpp"
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"

namespace mla::tools {
namespace {

// The mask of an indexer keeping `topk` keys per query (none: every key),
// and the number of (query, key) pairs it and `window` let through.
struct BenchMask {
  std::optional<HostTopkMask> topk;
  std::int64_t visible_pairs = 0;
};

BenchMask make_mask(const PrefillMetadata& metadata, std::optional<int> topk, std::int64_t window) {
  BenchMask mask;
  if (topk) mask.topk.emplace(metadata);
  std::mt19937_64 rng(20251129);
  std::vector<std::int32_t> candidates;
  for (int b = 0; b < metadata.batch_size(); ++b) {
    const std::int64_t sq = metadata.cu_seqlens_q[b + 1] - metadata.cu_seqlens_q[b];
    const std::int64_t sk = metadata.cu_seqlens_k[b + 1] - metadata.cu_seqlens_k[b];
    for (std::int64_t i = 0; i < sq; ++i) {
      const std::int64_t end = std::clamp<std::int64_t>(i + 1 + sk - sq, 0, sk);  // causal, bottom-right
      const std::int64_t begin = window > 0 ? std::max<std::int64_t>(0, i + sk - sq - window + 1) : 0;
      if (!topk) {
        mask.visible_pairs += std::max<std::int64_t>(end - begin, 0);
        continue;
      }
      candidates.resize(static_cast<std::size_t>(end));
      std::iota(candidates.begin(), candidates.end(), 0);
      const std::int64_t keep = std::min<std::int64_t>(*topk, end);
      // A partial Fisher-Yates draw: the first `keep` entries are the pick.
      for (std::int64_t n = 0; n < keep; ++n) {
        std::uniform_int_distribution<std::int64_t> pick(n, end - 1);
        std::swap(candidates[static_cast<std::size_t>(n)], candidates[static_cast<std::size_t>(pick(rng))]);
        const std::int32_t position = candidates[static_cast<std::size_t>(n)];
        mask.topk->allow(b, i, position);
        if (position >= begin) ++mask.visible_pairs;
      }
    }
  }
  return mask;
}

// Alternating samples of two runs: dense, then masked, `repeats` times.
struct PairedTiming {
  std::vector<double> dense_ms, masked_ms;
  AttentionResult masked_result;
};

template <class Dense, class Masked>
PairedTiming time_pairs(Queue& queue, int repeats, Progress& progress, Dense&& dense, Masked&& masked) {
  PairedTiming timing;
  dense();
  timing.masked_result = masked();  // warm-ups
  queue.wait();
  for (int i = 0; i < repeats; ++i) {
    for (int which = 0; which < 2; ++which) {
      const Event start = queue.record();
      AttentionResult result = which == 0 ? dense() : masked();
      const Event end = queue.record();
      (which == 0 ? timing.dense_ms : timing.masked_ms).push_back(Event::elapsed_ms(start, end));
      if (which == 1) timing.masked_result = std::move(result);
    }
    progress.report(fmt::format("pair {}/{}: dense {:.1f} ms, masked {:.1f} ms", i + 1, repeats, timing.dense_ms.back(),
                                timing.masked_ms.back()));
  }
  return timing;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const double at = p * static_cast<double>(values.size() - 1);
  const auto low = static_cast<std::size_t>(at);
  const std::size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (at - static_cast<double>(low)) * (values[high] - values[low]);
}

}  // namespace

int run_masked_bench(const BenchOptions& options) {
  if (options.topk && *options.topk < 1) {
    raise(ErrorCategory::invalid_argument, fmt::format("--topk must be at least 1, got {}", *options.topk));
  }
  if (options.window && *options.window < 1) {
    raise(ErrorCategory::invalid_argument, fmt::format("--window must be at least 1, got {}", *options.window));
  }
  if (options.context) {
    raise(ErrorCategory::invalid_argument, "--topk and --window time the new tokens alone: drop --context");
  }
  const BenchProblem problem = make_problem(options, std::vector<int>(6, 0));
  if (problem.dtype == DType::float8_e4m3) {
    raise(ErrorCategory::invalid_argument, "--topk and --window take bf16, fp16 or fp32 inputs");
  }
  Selector selector = options.selection.make_selector();
  const DeviceCapability platform = current_platform();
  const BackendParams params = problem.params();
  ChosenBackend chosen = choose_backend(selector, params, platform);
  PrefillBackend& backend = *chosen.backend;
  Queue& queue = chosen.queue;
  if (!backend.takes_attention_masks()) {
    raise(ErrorCategory::not_supported,
          backend.name() + " takes no top-k masks or windows yet (docs/contract.md §12); every built-in backend does");
  }

  const PrefillMetadata metadata = PrefillMetadata::from_lengths(problem.new_lengths, problem.new_lengths);
  const std::int64_t window = options.window.value_or(0);
  const BenchMask bench_mask = make_mask(metadata, options.topk, window);
  // The mask in queue memory (the host backends read host memory in place).
  UsmBuffer mask_words;
  AttentionMask mask;
  mask.window = window;
  if (bench_mask.topk) {
    const TopkMask host = bench_mask.topk->view();
    const std::int64_t words = host.batch_size * host.batch_stride;
    mask_words = UsmBuffer::device(queue, static_cast<std::size_t>(words) * sizeof(std::uint32_t));
    queue.memcpy(mask_words.get(), host.words, static_cast<std::size_t>(words) * sizeof(std::uint32_t));
    queue.wait();
    mask.topk =
        TopkMask::contiguous(mask_words.as<const std::uint32_t>(), host.batch_size, host.rows, host.words_per_row,
                             queue.backend() == DeviceBackend::host ? MemoryKind::host : MemoryKind::device);
  }

  const std::int64_t nq = problem.num_queries(), h = problem.heads;
  const int dqk = problem.dims.qk_head_dim(), dv = problem.dims.v_head_dim;
  std::uint64_t stream = 20251129;
  const auto fill = [&](int width) { return random_normal(nq * h * width, stream++); };
  const std::vector<float> q = fill(dqk), k = fill(dqk), v = fill(dv);
  const OwnedTensor dq = upload(queue, q, problem.dtype, {nq, h, dqk});
  const OwnedTensor dk = upload(queue, k, problem.dtype, {nq, h, dqk});
  const OwnedTensor dvv = upload(queue, v, problem.dtype, {nq, h, dv});
  backend.prepare(queue, metadata);
  const float scale = problem.scale();
  const auto dense = [&] { return backend.run_new_tokens(queue, dq.view, dk.view, dvv.view, scale, true); };
  const auto masked = [&] {
    return backend.run_new_tokens(queue, dq.view, dk.view, dvv.view, scale, true, std::nullopt, std::nullopt,
                                  std::nullopt, std::nullopt, mask);
  };
  Progress progress;
  const PairedTiming timing = time_pairs(queue, options.repeats, progress, dense, masked);
  queue.wait();

  const bool is_reference = is_builtin_reference(chosen);
  const bool check = !is_reference && !options.no_check;
  std::string rel = is_reference ? "0 (self)" : "-", lse = rel;
  if (check) {
    progress.report("running REFERENCE for the error check (--no-check skips it)");
    Queue host = Queue::host();
    const std::unique_ptr<PrefillBackend> reference =
        builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
    const OwnedTensor hq = upload(host, q, problem.dtype, {nq, h, dqk});
    const OwnedTensor hk = upload(host, k, problem.dtype, {nq, h, dqk});
    const OwnedTensor hv = upload(host, v, problem.dtype, {nq, h, dv});
    AttentionMask host_mask;
    host_mask.window = window;
    if (bench_mask.topk) host_mask.topk = bench_mask.topk->view();
    reference->prepare(host, metadata);
    const AttentionResult ref = reference->run_new_tokens(host, hq.view, hk.view, hv.view, scale, true, std::nullopt,
                                                          std::nullopt, std::nullopt, std::nullopt, host_mask);
    rel = fmt::format("{:.3e}", relative_error(download(queue, timing.masked_result.out), download(host, ref.out)));
    lse = fmt::format("{:.3e}", max_lse_error(download(queue, timing.masked_result.lse), download(host, ref.lse)));
  }
  progress.finish();

  std::cout << "mla-prefill bench: masked prefill (docs/contract.md §12) against dense causal, same inputs\n";
  print_backend_lines(platform, chosen);
  std::cout << fmt::format("shape      H={}, dims {}, {}, scale {:.6f}\n", h, to_string(problem.dims),
                           dtype_name(problem.dtype), scale);
  std::cout << fmt::format("batch      new tokens {} ({} queries), causal\n", lengths_text(problem.new_lengths), nq);
  std::cout << fmt::format("mask       {}{}{}\n",
                           options.topk
                               ? fmt::format("top-k {} drawn at random from each query's causal keys", *options.topk)
                               : std::string(),
                           options.topk && options.window ? "; " : "",
                           options.window ? fmt::format("window {}", *options.window) : std::string());
  std::cout << fmt::format("timing     {} alternating dense/masked pairs after 1 warm-up each, events on the queue\n",
                           options.repeats);
  std::cout << fmt::format("reference  {}\n\n", is_reference ? "the backend is REFERENCE itself: errors are 0 (self)"
                                                : check      ? "REFERENCE (fp64 accumulation) with the same mask"
                                                             : "not run (--no-check): errors are not known");
  const double per_pair = 2.0 * static_cast<double>(h) * (dqk + dv);
  const double dense_flops = problem.new_token_flops();
  const double masked_flops = per_pair * static_cast<double>(bench_mask.visible_pairs);
  std::vector<double> ratios;
  for (std::size_t i = 0; i < timing.dense_ms.size(); ++i) ratios.push_back(timing.masked_ms[i] / timing.dense_ms[i]);
  std::cout << fmt::format("{:<26} {:>10} {:>11} {:>9} {:>12} {:>12}\n", "phase", "GFLOP seen", "median ms", "TFLOP/s",
                           "rel. error", "max LSE err");
  const auto row = [&](const std::string& name, double flops, const std::vector<double>& samples, const std::string& r,
                       const std::string& l) {
    const double ms = median(samples);
    std::cout << fmt::format("{:<26} {:>10.3f} {:>11.3f} {:>9.4g} {:>12} {:>12}\n", name, flops / 1e9, ms,
                             ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0, r, l);
  };
  row("dense causal", dense_flops, timing.dense_ms, "-", "-");
  row("masked", masked_flops, timing.masked_ms, rel, lse);
  std::cout << fmt::format(
      "\nmasked / dense time: median {:.3f} (p10 {:.3f}, p90 {:.3f}); the mask lets {:.1f}% of the causal pairs "
      "through\n",
      median(ratios), percentile(ratios, 0.1), percentile(ratios, 0.9), 100.0 * masked_flops / dense_flops);
  return exit_success;
}

}  // namespace mla::tools
