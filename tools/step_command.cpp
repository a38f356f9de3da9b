// mla-prefill step: the whole MLA prefill step (run_mla_prefill) on .npy
// files: paged latent cache, block table, kv_b_proj, new tokens.
#include <cmath>
#include <iostream>
#include <limits>

#include "command.hpp"
#include "mla/platform.hpp"
#include "npy.hpp"

namespace mla::tools {
namespace {

struct StepOptions {
  SelectionOptions selection;
  std::string q, kv_c, k_pe, cache, block_table, context_lens, cu_seqlens_q, kv_b_proj, out;
  std::optional<std::string> lse, dims;
  std::optional<float> cache_scale;
  float scale = 0.0f;
  std::int64_t workspace_tokens = 64 * 1024;
  std::string dtype = "bf16";
};

[[noreturn]] void bad(const std::string& message) { raise(ErrorCategory::invalid_argument, message); }

// The block table: a 2-d integer array [B, max_blocks] of int32 values.
std::vector<std::int32_t> load_block_table(const std::string& path, int& max_blocks) {
  const NpyArray array = read_npy(path);
  const std::string what = "--block-table (" + path + ")";
  if (array.rank() != 2) bad(what + ": expected a 2-d array [batch, max_blocks], got " + array.describe());
  check_int_extents(array.shape, what);
  std::vector<std::int32_t> table;
  for (std::int64_t value : array.to_integers(what)) {
    if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max()) {
      bad(what + ": block id " + std::to_string(value) + " does not fit int32");
    }
    table.push_back(static_cast<std::int32_t>(value));
  }
  max_blocks = static_cast<int>(array.shape[1]);
  return table;
}

// P, R and V from the tensors: R from --k-pe, P = dqk - R, V from the rows of
// --kv-b-proj per head; --dims, when given, must agree.
MlaDims infer_dims(const StepOptions& options, const HostTensor& q, const HostTensor& k_pe, const HostTensor& w) {
  const std::int64_t heads = q.size(1), rope = k_pe.size(1), dqk = q.size(2);
  if (heads <= 0) bad("--q has no heads: " + std::to_string(heads) + " in [tokens, heads, P + R]");
  if (rope <= 0 || rope >= dqk) {
    bad("--k-pe rows have " + std::to_string(rope) + " elements; the rope width must be positive and below q's " +
        std::to_string(dqk));
  }
  const std::int64_t nope = dqk - rope;
  if (w.size(0) % heads != 0 || w.size(0) / heads <= nope) {
    bad("--kv-b-proj has " + std::to_string(w.size(0)) + " rows; expected heads (" + std::to_string(heads) +
        ") x (P + V) with P = " + std::to_string(nope));
  }
  const MlaDims dims{static_cast<int>(nope), static_cast<int>(rope), static_cast<int>(w.size(0) / heads - nope)};
  if (options.dims && parse_dims(*options.dims, "--dims") != dims) {
    bad("--dims " + *options.dims + " disagrees with the tensors, which give " + to_string(dims));
  }
  return dims;
}

// The cache on the queue: floats rounded to the compute dtype, or fp8 bytes as they are.
OwnedTensor upload_cache(Queue& queue, const StepOptions& options, DType dtype) {
  const NpyArray array = read_npy(options.cache);
  const std::string what = "--cache (" + options.cache + ")";
  if (array.rank() != 3) bad(what + ": expected a 3-d array [blocks, block_size, L + R], got " + array.describe());
  check_int_extents(array.shape, what);
  const std::int64_t blocks = array.shape[0], size = array.shape[1], width = array.shape[2];
  if (array.type != NpyType::uint8) {
    if (options.cache_scale) bad("--cache-scale is for an fp8 cache (uint8 bytes), but " + what + " holds floats");
    return upload(queue, array.to_floats(what), dtype, {blocks, size, width});
  }
  if (!options.cache_scale) bad(what + " holds fp8 bytes (uint8): give their scale with --cache-scale");
  OwnedTensor tensor = OwnedTensor::device(queue, DType::float8_e4m3, {blocks, size, width});
  const std::vector<unsigned char>& bytes = array.bytes(what);
  if (!bytes.empty()) queue.memcpy(tensor.view.data, bytes.data(), bytes.size());
  queue.wait();
  return tensor;
}

int run_step(const StepOptions& options) {
  const DType dtype = parse_dtype_and_scale(options.dtype, options.scale);
  check_distinct_outputs({{"--out", options.out}, {"--lse", options.lse}});
  const HostTensor q = load_float_tensor(options.q, "--q", 3, "[tokens, heads, P + R]");
  const HostTensor kv_c = load_float_tensor(options.kv_c, "--kv-c", 2, "[tokens, L]");
  const HostTensor k_pe = load_float_tensor(options.k_pe, "--k-pe", 2, "[tokens, R]");
  const HostTensor w = load_float_tensor(options.kv_b_proj, "--kv-b-proj", 2, "[heads * (P + V), L]");
  const MlaDims dims = infer_dims(options, q, k_pe, w);
  MlaStepMetadata metadata;
  metadata.cu_seqlens_q = load_cu_seqlens(options.cu_seqlens_q, "--cu-seqlens-q");
  metadata.context_lens = load_cu_seqlens(options.context_lens, "--context-lens", "[batch]");
  metadata.block_table = load_block_table(options.block_table, metadata.max_blocks);

  Selector selector = options.selection.make_selector();
  BackendParams params;
  params.num_heads = static_cast<int>(q.size(1));
  params.dims = dims;
  params.dtype = dtype;
  params.kv_lora_rank = static_cast<int>(w.size(1));
  auto [selection, backend, queue] = choose_backend(selector, params, current_platform());

  const std::int64_t nq = q.size(0), heads = q.size(1);
  OwnedTensor q_dev = upload(queue, q.values, dtype, {nq, heads, q.size(2)});
  OwnedTensor kv_dev = upload(queue, kv_c.values, dtype, {kv_c.size(0), kv_c.size(1)});
  OwnedTensor pe_dev = upload(queue, k_pe.values, dtype, {k_pe.size(0), k_pe.size(1)});
  OwnedTensor w_dev = upload(queue, w.values, DType::float32, {w.size(0), w.size(1)});
  OwnedTensor cache = upload_cache(queue, options, dtype);
  OwnedTensor out = OwnedTensor::device(queue, dtype, {nq, heads, dims.v_head_dim});
  OwnedTensor lse = OwnedTensor::device(queue, DType::float32, {heads, nq});
  const MlaStepInputs inputs{q_dev.view, kv_dev.view, pe_dev.view, cache.view, options.cache_scale.value_or(1.0f),
                             w_dev.view};
  // The cache file sets the block size; the plan checks every tensor against it.
  const MlaStepPlan plan =
      plan_mla_prefill(params, metadata, static_cast<int>(cache.view.size(1)), options.workspace_tokens);
  run_mla_prefill(*backend, queue, plan, inputs, {out.view, options.lse ? lse.view : TensorView{}}, {}, options.scale);
  queue.wait();

  save_float_tensor(options.out, {nq, heads, dims.v_head_dim}, download(queue, out.view));
  if (options.lse) save_float_tensor(*options.lse, {heads, nq}, download(queue, lse.view));
  std::int64_t context = 0;
  for (std::int32_t length : metadata.context_lens) context += length;
  std::cout << "mla-prefill: step on " << backend->name() << " (" << selection.why
            << "): " << metadata.context_lens.size() << " sequences, " << nq << " new tokens, " << context
            << " cached tokens in blocks of " << cache.view.size(1) << ", " << heads << " heads, " << dtype_name(dtype)
            << ", " << to_string(dims) << ", L=" << w.size(1) << '\n';
  return exit_success;
}

}  // namespace

Command add_step_command(CLI::App& parent) {
  auto options = std::make_shared<StepOptions>();
  CLI::App* app = parent.add_subcommand(
      "step", "Run the whole MLA prefill step (paged latent cache, kv_b_proj, chunked context) on .npy files");
  options->selection.add_to(*app);
  app->add_option("--q", options->q, "queries of the new tokens [Nq, H, P+R], float32 or float16")->required();
  app->add_option("--kv-c", options->kv_c, "latents of the new tokens [Nq, L]")->required();
  app->add_option("--k-pe", options->k_pe, "rope keys of the new tokens [Nq, R]")->required();
  app->add_option("--cache", options->cache,
                  "paged latent cache [blocks, block_size, L+R]: floats, or uint8 fp8 e4m3 bytes with --cache-scale")
      ->required();
  app->add_option("--block-table", options->block_table, "[B, max_blocks] int32 or int64 cache block ids")->required();
  app->add_option("--context-lens", options->context_lens, "[B] tokens cached before the new ones")->required();
  app->add_option("--cu-seqlens-q", options->cu_seqlens_q, "[B+1] new tokens, cumulated from 0 to Nq")->required();
  app->add_option("--kv-b-proj", options->kv_b_proj, "up-projection weight [H*(P+V), L], y = x W^T")->required();
  app->add_option("--scale", options->scale, "softmax scale, e.g. 192^-0.5")->required();
  add_optional(*app, "--cache-scale", options->cache_scale, "scale of an fp8 cache: value = byte * scale");
  app->add_option("--workspace-tokens", options->workspace_tokens, "context tokens gathered at a time across the batch")
      ->capture_default_str();
  app->add_option("--dtype", options->dtype, "compute type: bf16, fp16 or fp32")->capture_default_str();
  add_optional(*app, "--dims", options->dims, "MLA dims P,R,V to check against the tensors");
  app->add_option("--out", options->out, "output [Nq, H, V], written as float32 .npy")->required();
  add_optional(*app, "--lse", options->lse, "also write the LSE [H, Nq] (natural log, float32 .npy)");
  return {app, [options] { return run_step(*options); }};
}

}  // namespace mla::tools
