// mla-prefill bench --step: times the whole MLA prefill step (run_mla_prefill)
// on a DeepSeek-V3 shape with cached context, split into its phases: the
// gather from the paged latent cache, the kv_b_proj up-projection, attention
// (new tokens and context chunks) and the LSE merges. Checks the output
// against REFERENCE (fp64 projection and attention) on the same inputs.
//
// The built-in batch is the attention benchmark's, with longer contexts that
// the default workspace of 2048 tokens splits into several chunks, so that
// every phase runs more than once.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>

#include "bench.hpp"
#include "host_fill.hpp"
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"

namespace mla::tools {
namespace {

struct StepProblem {
  BenchProblem shape;
  int latent = 512;  // L, kv_lora_rank
  int block_size = 16;
  std::int64_t workspace_tokens = 2048;
  bool fp8_cache = false;
  float cache_scale = 1.0f / 64;  // fp8 cache: values up to 448 / 64 = 7 are representable

  std::int64_t columns() const {
    return std::int64_t{shape.heads} * (shape.dims.qk_nope_head_dim + shape.dims.v_head_dim);
  }
  // kv = latent . W^T for every new and every cached token.
  double projection_flops() const {
    return 2.0 * static_cast<double>(shape.num_queries() + shape.num_context()) * latent *
           static_cast<double>(columns());
  }
};

StepProblem make_step_problem(const BenchOptions& options) {
  StepProblem problem;
  problem.shape = make_problem(options, {1000, 0, 17, 640, 0, 2000});
  if (problem.shape.dtype == DType::float8_e4m3) {
    raise(ErrorCategory::invalid_argument,
          "--dtype fp8 times attention alone: --step does not time the MLA step's FP8 attention mode yet");
  }
  const auto positive = [](std::int64_t value, const char* flag) {
    if (value < 1) raise(ErrorCategory::invalid_argument, fmt::format("{} must be at least 1, got {}", flag, value));
  };
  positive(options.block_size, "--block-size");
  positive(options.workspace_tokens, "--workspace-tokens");
  positive(options.kv_lora_rank, "--kv-lora-rank");
  problem.latent = options.kv_lora_rank;
  problem.block_size = options.block_size;
  problem.workspace_tokens = options.workspace_tokens;
  problem.fp8_cache = options.fp8_cache;
  return problem;
}

// Random host inputs (normal, never zeros) and a block table that hands the
// cache's blocks out in shuffled order.
struct StepData {
  MlaStepMetadata metadata;
  std::vector<float> q, kv_c, k_pe, cache, w;
  std::int64_t num_blocks = 0;

  explicit StepData(const StepProblem& problem) {
    const BenchProblem& shape = problem.shape;
    std::mt19937 generator(20240602);  // the block order
    std::uint64_t stream = 20240602;
    const auto fill = [&](std::int64_t count, float scale) { return random_normal(count, stream++, scale); };
    const std::int64_t batch = static_cast<std::int64_t>(shape.new_lengths.size());
    const std::int64_t nq = shape.num_queries();
    const int rope = shape.dims.qk_rope_head_dim;
    metadata.cu_seqlens_q.push_back(0);
    int max_blocks = 1;
    for (std::int64_t b = 0; b < batch; ++b) {
      const int context = shape.context_lengths[static_cast<std::size_t>(b)];
      metadata.cu_seqlens_q.push_back(metadata.cu_seqlens_q.back() + shape.new_lengths[static_cast<std::size_t>(b)]);
      metadata.context_lens.push_back(context);
      const int blocks = (context + problem.block_size - 1) / problem.block_size;
      max_blocks = std::max(max_blocks, blocks);
      num_blocks += blocks;
    }
    num_blocks = std::max<std::int64_t>(num_blocks, 1);
    std::vector<std::int32_t> order(static_cast<std::size_t>(num_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), generator);
    metadata.max_blocks = max_blocks;
    metadata.block_table.assign(static_cast<std::size_t>(batch * max_blocks), 0);
    std::size_t next = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      const int blocks =
          (metadata.context_lens[static_cast<std::size_t>(b)] + problem.block_size - 1) / problem.block_size;
      for (int j = 0; j < blocks; ++j)
        metadata.block_table[static_cast<std::size_t>(b * max_blocks + j)] = order[next++];
    }
    q = fill(nq * shape.heads * shape.dims.qk_head_dim(), 1.0f);
    kv_c = fill(nq * problem.latent, 1.0f);
    k_pe = fill(nq * rope, 1.0f);
    // The fp8 cache holds value / scale, dequantised by the step.
    cache = fill(num_blocks * problem.block_size * (problem.latent + rope),
                 problem.fp8_cache ? 1.0f / problem.cache_scale : 1.0f);
    // Keys and values come out near unit variance, as after a trained projection.
    w = fill(problem.columns() * problem.latent, 1.0f / std::sqrt(static_cast<float>(problem.latent)));
  }
};

// The inputs on one queue, and the outputs.
struct StepTensors {
  OwnedTensor q, kv_c, k_pe, cache, w, out, lse;

  StepTensors(Queue& queue, const StepProblem& problem, const StepData& data) {
    const BenchProblem& shape = problem.shape;
    const std::int64_t nq = shape.num_queries(), heads = shape.heads, rope = shape.dims.qk_rope_head_dim;
    q = upload(queue, data.q, shape.dtype, {nq, heads, shape.dims.qk_head_dim()});
    kv_c = upload(queue, data.kv_c, shape.dtype, {nq, problem.latent});
    k_pe = upload(queue, data.k_pe, shape.dtype, {nq, rope});
    cache = upload(queue, data.cache, problem.fp8_cache ? DType::float8_e4m3 : shape.dtype,
                   {data.num_blocks, problem.block_size, problem.latent + rope});
    w = upload(queue, data.w, shape.dtype, {problem.columns(), problem.latent});
    out = OwnedTensor::device(queue, shape.dtype, {nq, heads, shape.dims.v_head_dim});
    lse = OwnedTensor::device(queue, DType::float32, {heads, nq});
  }

  MlaStepInputs inputs(const StepProblem& problem) const {
    return {q.view, kv_c.view, k_pe.view, cache.view, problem.fp8_cache ? problem.cache_scale : 1.0f, w.view};
  }
};

struct StepRun {
  MlaStepPhases phases;
  std::vector<float> out, lse;
};

StepRun run_once(PrefillBackend& backend, Queue& queue, const StepProblem& problem, const MlaStepPlan& plan,
                 StepTensors& tensors) {
  StepRun run;
  run_mla_prefill(backend, queue, plan, tensors.inputs(problem), {tensors.out.view, tensors.lse.view}, {},
                  problem.shape.scale(), std::nullopt, &run.phases);
  return run;
}

}  // namespace

int run_step_bench(const BenchOptions& options) {
  const StepProblem problem = make_step_problem(options);
  const BenchProblem& shape = problem.shape;
  Selector selector = options.selection.make_selector();
  const DeviceCapability platform = current_platform();
  BackendParams params = shape.params();
  params.kv_lora_rank = problem.latent;
  ChosenBackend chosen = choose_backend(selector, params, platform);
  PrefillBackend& backend = *chosen.backend;
  Queue& queue = chosen.queue;
  const StepData data(problem);
  const MlaStepPlan plan = plan_mla_prefill(params, data.metadata, problem.block_size, problem.workspace_tokens);
  StepTensors tensors(queue, problem, data);

  Progress progress;
  run_once(backend, queue, problem, plan, tensors);  // warm-up
  progress.report("warm-up done");
  std::vector<double> gather, projection, attention, merge, total;
  for (int i = 0; i < options.repeats; ++i) {
    const StepRun run = run_once(backend, queue, problem, plan, tensors);
    gather.push_back(run.phases.gather_ms);
    projection.push_back(run.phases.projection_ms);
    attention.push_back(run.phases.attention_ms);
    merge.push_back(run.phases.merge_ms);
    total.push_back(run.phases.total_ms());
    progress.report(fmt::format("run {}/{} took {:.1f} ms", i + 1, options.repeats, total.back()));
  }
  const std::vector<float> out = download(queue, tensors.out.view), lse = download(queue, tensors.lse.view);

  const bool is_reference = is_builtin_reference(chosen);
  const bool check = !is_reference && !options.no_check;
  std::string rel = is_reference ? "0 (self)" : "-", lse_err = rel;
  if (check) {
    progress.report("running REFERENCE for the error check (--no-check skips it)");
    Queue host = Queue::host();
    const std::unique_ptr<PrefillBackend> reference =
        builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
    StepTensors host_tensors(host, problem, data);
    run_once(*reference, host, problem, plan, host_tensors);
    rel = fmt::format("{:.3e}", relative_error(out, download(host, host_tensors.out.view)));
    lse_err = fmt::format("{:.3e}", max_lse_error(lse, download(host, host_tensors.lse.view)));
  }
  progress.finish();

  std::cout << fmt::format("mla-prefill bench --step: {}\n", shape.built_in
                                                                 ? "DeepSeek-V3 MLA prefill step at TP8"
                                                                 : "MLA prefill step, shape from the options");
  print_backend_lines(platform, chosen);
  std::cout << fmt::format("shape      H={}, dims {}, L={}, {}, scale {:.6f}\n", shape.heads, to_string(shape.dims),
                           problem.latent, dtype_name(shape.dtype), shape.scale());
  std::cout << fmt::format(
      "cache      {} in blocks of {}, {} blocks shuffled; kv_b_proj {}\n",
      problem.fp8_cache ? fmt::format("fp8 e4m3, scale {}", problem.cache_scale) : std::string(dtype_name(shape.dtype)),
      problem.block_size, data.num_blocks, dtype_name(shape.dtype));
  std::cout << fmt::format("batch      new tokens {} ({}); cached {} ({})\n", lengths_text(shape.new_lengths),
                           shape.num_queries(), lengths_text(shape.context_lengths), shape.num_context());
  std::cout << fmt::format("workspace  {} tokens: {} context chunk(s)\n", problem.workspace_tokens, plan.num_chunks());
  std::cout << fmt::format("timing     median of {} run(s) after 1 warm-up, events on the queue between phases\n",
                           options.repeats);
  std::cout << fmt::format("reference  {}\n\n", is_reference ? "the backend is REFERENCE itself: errors are 0 (self)"
                                                : check      ? "REFERENCE (fp64 projection and attention), same inputs"
                                                             : "not run (--no-check): errors are not known");

  const double total_ms = median(total);
  std::cout << fmt::format("{:<12} {:>8} {:>11} {:>7} {:>9}\n", "phase", "GFLOP", "median ms", "share", "GFLOP/s");
  const auto row = [&](const char* name, double flops, const std::vector<double>& samples) {
    const double ms = median(samples);
    const std::string rate = flops > 0 && ms > 0 ? fmt::format("{:.1f}", flops / (ms * 1e-3) / 1e9) : "-";
    std::cout << fmt::format("{:<12} {:>8} {:>11.3f} {:>6.1f}% {:>9}\n", name,
                             flops > 0 ? fmt::format("{:.3f}", flops / 1e9) : "-", ms,
                             total_ms > 0 ? 100.0 * ms / total_ms : 0.0, rate);
  };
  row("gather", 0, gather);
  row("projection", problem.projection_flops(), projection);
  row("attention", shape.new_token_flops() + shape.chunk_flops(), attention);
  row("merge", 0, merge);
  row("total", problem.projection_flops() + shape.new_token_flops() + shape.chunk_flops(), total);
  std::cout << fmt::format("\noutput vs REFERENCE: relative error {}, max LSE error {}\n", rel, lse_err);
  return exit_success;
}

}  // namespace mla::tools
