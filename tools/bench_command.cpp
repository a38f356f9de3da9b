// mla-prefill bench: times the selected backend on a DeepSeek-V3 prefill
// problem and checks its result against REFERENCE.
//
// The built-in problem is small on purpose: REFERENCE (fp64 accumulation, one
// core) is the fallback when no faster backend is built, and the command must
// still finish in seconds there. Its lengths are odd and include an empty
// sequence and a single token, so the timing covers the ragged cases too.
// --heads, --lengths, --context, --dims and --dtype replace parts of it (a GPU
// needs thousands of tokens per sequence to reach its peak); --no-check skips
// the REFERENCE run, which takes minutes to hours on such shapes.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <numeric>

#include "bench.hpp"
#include "command.hpp"
#include "host_fill.hpp"
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"

namespace mla::tools {
namespace {

// Random inputs on the host (normal, never zeros), one vector per tensor.
struct BenchInputs {
  std::vector<float> q, k, v, chunk_k, chunk_v;

  explicit BenchInputs(const BenchProblem& problem) {
    std::uint64_t stream = 20240601;
    const auto fill = [&](std::int64_t tokens, int width) {
      return random_normal(tokens * problem.heads * width, stream++);
    };
    const int dqk = problem.dims.qk_head_dim();
    const int dv = problem.dims.v_head_dim;
    q = fill(problem.num_queries(), dqk);
    k = fill(problem.num_queries(), dqk);
    v = fill(problem.num_queries(), dv);
    chunk_k = fill(problem.num_context(), dqk);
    chunk_v = fill(problem.num_context(), dv);
  }
};

// The largest magnitude of `a` and `b` over 448, e4m3's largest value: the
// per-tensor descale a static fp8 quantiser takes from the data (1 for
// all-zero data).
float fp8_descale(const std::vector<float>& a, const std::vector<float>& b) {
  float amax = 0.0f;
  for (float x : a) amax = std::max(amax, std::fabs(x));
  for (float x : b) amax = std::max(amax, std::fabs(x));
  return amax > 0.0f ? amax / 448.0f : 1.0f;
}

// `values` divided by `descale`, to be rounded to e4m3 by upload.
std::vector<float> descaled(const std::vector<float>& values, float descale) {
  std::vector<float> out(values.size());
  parallel_ranges(static_cast<std::int64_t>(values.size()), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      out[static_cast<std::size_t>(i)] = values[static_cast<std::size_t>(i)] / descale;
  });
  return out;
}

// The inputs copied to one queue in the problem's dtype; fp8 inputs are
// quantised with one descale per tensor from the data (the new and cached
// keys share k's, values v's, as run_prefill_step takes them).
struct DeviceInputs {
  OwnedTensor q, k, v, chunk_k, chunk_v;
  std::optional<InputDescales> descales;

  DeviceInputs(Queue& queue, const BenchProblem& problem, const BenchInputs& inputs) {
    const std::int64_t nq = problem.num_queries();
    const std::int64_t nc = problem.num_context();
    const std::int64_t h = problem.heads;
    const std::int64_t dqk = problem.dims.qk_head_dim();
    const std::int64_t dv = problem.dims.v_head_dim;
    const DType dtype = problem.dtype;
    if (dtype == DType::float8_e4m3) {
      const InputDescales d{fp8_descale(inputs.q, {}), fp8_descale(inputs.k, inputs.chunk_k),
                            fp8_descale(inputs.v, inputs.chunk_v)};
      descales = d;
      q = upload(queue, descaled(inputs.q, d.q.value), dtype, {nq, h, dqk});
      k = upload(queue, descaled(inputs.k, d.k.value), dtype, {nq, h, dqk});
      v = upload(queue, descaled(inputs.v, d.v.value), dtype, {nq, h, dv});
      chunk_k = upload(queue, descaled(inputs.chunk_k, d.k.value), dtype, {nc, h, dqk});
      chunk_v = upload(queue, descaled(inputs.chunk_v, d.v.value), dtype, {nc, h, dv});
      return;
    }
    q = upload(queue, inputs.q, dtype, {nq, h, dqk});
    k = upload(queue, inputs.k, dtype, {nq, h, dqk});
    v = upload(queue, inputs.v, dtype, {nq, h, dv});
    chunk_k = upload(queue, inputs.chunk_k, dtype, {nc, h, dqk});
    chunk_v = upload(queue, inputs.chunk_v, dtype, {nc, h, dv});
  }
};

// Output and LSE of one phase, copied back to the host.
struct PhaseResult {
  std::vector<float> out, lse;
};

PhaseResult download_result(Queue& queue, const AttentionResult& result) {
  queue.wait();
  return {download(queue, result.out), download(queue, result.lse)};
}

AttentionResult run_new_tokens(PrefillBackend& backend, Queue& queue, const DeviceInputs& in, float scale) {
  return backend.run_new_tokens(queue, in.q.view, in.k.view, in.v.view, scale, true, std::nullopt, std::nullopt,
                                std::nullopt, in.descales);
}

AttentionResult run_step(PrefillBackend& backend, Queue& queue, const PrefillMetadata& metadata, const DeviceInputs& in,
                         float scale) {
  return run_prefill_step(backend, queue, metadata, in.q.view, in.k.view, in.v.view, {in.chunk_k.view},
                          {in.chunk_v.view}, scale, in.descales);
}

struct Timing {
  double median_ms = 0;
  PhaseResult result;  // of the last timed run
};

// One warm-up, then `repeats` runs timed by events on the queue. Only the
// backend's work lies between the events; copies back come after the last run.
template <class Run>
Timing time_phase(Queue& queue, const std::string& name, int repeats, Progress& progress, Run&& run) {
  AttentionResult last = run();  // warm-up
  queue.wait();
  progress.report(name + ": warm-up done");
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    const Event start = queue.record();
    AttentionResult current = run();
    const Event end = queue.record();
    samples.push_back(Event::elapsed_ms(start, end));
    last = std::move(current);  // frees the previous result outside the timed span
    progress.report(fmt::format("{}: run {}/{} took {:.1f} ms", name, i + 1, repeats, samples.back()));
  }
  Timing timing;
  timing.median_ms = median(samples);
  timing.result = download_result(queue, last);
  return timing;
}

int run_bench(const BenchOptions& options) {
  if (options.repeats < 1) {
    raise(ErrorCategory::invalid_argument, "--repeats must be at least 1, got " + std::to_string(options.repeats));
  }
  if (options.step) return run_step_bench(options);
  if (options.topk || options.window) return run_masked_bench(options);
  const BenchProblem problem = make_problem(options, BenchProblem().context_lengths);
  Selector selector = options.selection.make_selector();
  const DeviceCapability platform = current_platform();
  const BackendParams params = problem.params();
  ChosenBackend chosen = choose_backend(selector, params, platform);
  PrefillBackend& backend = *chosen.backend;
  Queue& queue = chosen.queue;

  PrefillMetadata metadata = PrefillMetadata::from_lengths(problem.new_lengths, problem.new_lengths);
  metadata.add_chunk(problem.context_lengths);
  const BenchInputs inputs(problem);
  const DeviceInputs device_inputs(queue, problem, inputs);
  backend.prepare(queue, metadata);

  Progress progress;
  const Timing new_tokens = time_phase(queue, "new tokens", options.repeats, progress,
                                       [&] { return run_new_tokens(backend, queue, device_inputs, problem.scale()); });
  const Timing step = time_phase(queue, "prefill step", options.repeats, progress,
                                 [&] { return run_step(backend, queue, metadata, device_inputs, problem.scale()); });

  // The oracle: the library's own REFERENCE (not a configured override) on the same inputs.
  const bool is_reference = is_builtin_reference(chosen);
  const bool check = !is_reference && !options.no_check;
  PhaseResult reference_new, reference_step;  // left empty without a check
  if (check) {
    progress.report("running REFERENCE for the error check (--no-check skips it)");
    Queue host = Queue::host();
    const std::unique_ptr<PrefillBackend> reference =
        builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
    const DeviceInputs host_inputs(host, problem, inputs);
    reference->prepare(host, metadata);
    reference_new = download_result(host, run_new_tokens(*reference, host, host_inputs, problem.scale()));
    reference_step = download_result(host, run_step(*reference, host, metadata, host_inputs, problem.scale()));
  }
  progress.finish();

  std::cout << fmt::format("mla-prefill bench: {}\n", problem.built_in ? "DeepSeek-V3 prefill at TP8"
                                                                       : "DeepSeek-V3 prefill, shape from the options");
  print_backend_lines(platform, chosen);
  const std::string dtype_text =
      problem.dtype == DType::float8_e4m3
          ? fmt::format("float8_e4m3 (descales from the data: q {:.4g}, k {:.4g}, v {:.4g}; output bfloat16)",
                        device_inputs.descales->q.value, device_inputs.descales->k.value,
                        device_inputs.descales->v.value)
          : std::string(dtype_name(problem.dtype));
  std::cout << fmt::format("shape      H={}, dims {}, {}, scale {:.6f}\n", problem.heads, to_string(problem.dims),
                           dtype_text, problem.scale());
  std::cout << fmt::format("batch      new tokens {} ({} queries); one context chunk {} ({} keys)\n",
                           lengths_text(problem.new_lengths), problem.num_queries(),
                           lengths_text(problem.context_lengths), problem.num_context());
  std::cout << fmt::format("timing     median of {} run(s) after 1 warm-up, events on the queue\n", options.repeats);
  std::cout << fmt::format("reference  {}\n\n", is_reference ? "the backend is REFERENCE itself: errors are 0 (self)"
                                                : check      ? "REFERENCE (fp64 accumulation) on the same inputs"
                                                             : "not run (--no-check): errors are not known");

  std::cout << fmt::format("{:<32} {:>8} {:>11} {:>9} {:>12} {:>12}\n", "phase", "GFLOP", "median ms", "TFLOP/s",
                           "rel. error", "max LSE err");
  const auto row = [&](const std::string& name, double flops, const Timing& timing, const PhaseResult& reference) {
    const double tflops = timing.median_ms > 0 ? flops / (timing.median_ms * 1e-3) / 1e12 : 0.0;
    const std::string rel = is_reference ? "0 (self)"
                            : check      ? fmt::format("{:.3e}", relative_error(timing.result.out, reference.out))
                                         : "-";
    const std::string lse = is_reference ? "0 (self)"
                            : check      ? fmt::format("{:.3e}", max_lse_error(timing.result.lse, reference.lse))
                                         : "-";
    std::cout << fmt::format("{:<32} {:>8.3f} {:>11.3f} {:>9.4g} {:>12} {:>12}\n", name, flops / 1e9, timing.median_ms,
                             tflops, rel, lse);
  };
  row("new tokens (causal)", problem.new_token_flops(), new_tokens, reference_new);
  row("prefill step (+1 chunk, merge)", problem.new_token_flops() + problem.chunk_flops(), step, reference_step);
  return exit_success;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* app = parent.add_subcommand(
      "bench", "Time the selected backend on a built-in DeepSeek-V3 prefill problem and check it against REFERENCE");
  options->selection.add_to(*app);
  app->add_option("--repeats", options->repeats, "timed runs after one warm-up; the median is reported")
      ->capture_default_str();
  add_optional(*app, "--heads", options->heads, "query heads (default 16, DeepSeek-V3's 128 at TP8)");
  add_optional(*app, "--lengths", options->lengths,
               "new tokens per sequence, e.g. 4096 or 1024,0,3000 (default 300,200,1,0,97,333)");
  add_optional(*app, "--context", options->context,
               "cached keys per sequence in one context chunk, one per sequence (default 128,0,17,64,0,160 for the "
               "built-in batch, none with --lengths)");
  add_optional(*app, "--dims", options->dims, "MLA dims P,R,V (default 128,64,128)");
  add_optional(*app, "--dtype", options->dtype,
               "bf16, fp16, fp32 or fp8 (e4m3 inputs quantised with per-tensor descales from the data, bf16 output; "
               "not with --step) (default bf16)");
  app->add_flag("--no-check", options->no_check, "skip the REFERENCE run that measures the errors");
  CLI::Option* step = app->add_flag(
      "--step", options->step,
      "time the whole MLA step (gather from a paged latent cache, kv_b_proj up-projection, attention over chunked "
      "context, merges) split by phase; default batch 300,200,1,0,97,333 new tokens after 1000,0,17,640,0,2000 "
      "cached");
  app->add_option("--block-size", options->block_size, "--step: tokens per cache block")
      ->capture_default_str()
      ->needs(step);
  app->add_option("--workspace-tokens", options->workspace_tokens,
                  "--step: context tokens gathered at a time across the batch")
      ->capture_default_str()
      ->needs(step);
  app->add_option("--kv-lora-rank", options->kv_lora_rank, "--step: latent width L")
      ->capture_default_str()
      ->needs(step);
  app->add_flag("--fp8-cache", options->fp8_cache, "--step: the cache holds fp8 e4m3 bytes with a per-tensor scale")
      ->needs(step);
  add_optional(*app, "--topk", options->topk,
               "time the new tokens with a top-k key mask (K random causal keys per query, docs/contract.md §12) "
               "against dense causal attention, alternately")
      ->excludes(step);
  add_optional(*app, "--window", options->window, "the same with a sliding window of W keys (alone or with --topk)")
      ->excludes(step);
  return {app, [options] { return run_bench(*options); }};
}

}  // namespace mla::tools
