// mla-prefill merge: joins two partial attention states (output and LSE) with
// the selected backend's merge_attn_states (docs/contract.md §3).
#include <fmt/format.h>

#include <iostream>

#include "command.hpp"
#include "mla/platform.hpp"

namespace mla::tools {
namespace {

struct MergeOptions {
  SelectionOptions selection;
  std::string prefix_out, prefix_lse, suffix_out, suffix_lse, out, out_lse;
  std::optional<std::int64_t> prefill_tokens_with_context;
  std::optional<std::string> dims;
};

// Every state must describe the same [N, H, V] outputs and [H, N] LSEs.
void check_states(const HostTensor& prefix_out, const HostTensor& prefix_lse, const HostTensor& suffix_out,
                  const HostTensor& suffix_lse) {
  const auto shape_text = [](const HostTensor& t) { return fmt::format("[{}]", fmt::join(t.shape, ", ")); };
  if (prefix_out.shape != suffix_out.shape) {
    raise(ErrorCategory::invalid_argument, "--prefix-out is " + shape_text(prefix_out) + " but --suffix-out is " +
                                               shape_text(suffix_out) + "; both are [tokens, heads, V]");
  }
  const std::vector<std::int64_t> lse_shape{prefix_out.size(1), prefix_out.size(0)};
  for (const auto& [lse, flag] : {std::pair{&prefix_lse, "--prefix-lse"}, {&suffix_lse, "--suffix-lse"}}) {
    if (lse->shape != lse_shape) {
      raise(ErrorCategory::invalid_argument,
            std::string(flag) + " is " + shape_text(*lse) + " but the outputs need [heads, tokens] = [" +
                std::to_string(lse_shape[0]) + ", " + std::to_string(lse_shape[1]) + "]");
    }
  }
}

int run_merge(const MergeOptions& options) {
  check_distinct_outputs({{"--out", options.out}, {"--out-lse", options.out_lse}});
  const HostTensor prefix_out = load_float_tensor(options.prefix_out, "--prefix-out", 3, "[tokens, heads, V]");
  const HostTensor prefix_lse = load_float_tensor(options.prefix_lse, "--prefix-lse", 2, "[heads, tokens]");
  const HostTensor suffix_out = load_float_tensor(options.suffix_out, "--suffix-out", 3, "[tokens, heads, V]");
  const HostTensor suffix_lse = load_float_tensor(options.suffix_lse, "--suffix-lse", 2, "[heads, tokens]");
  check_states(prefix_out, prefix_lse, suffix_out, suffix_lse);
  const std::int64_t tokens = prefix_out.size(0);
  const std::int64_t heads = prefix_out.size(1);
  const std::int64_t dv = prefix_out.size(2);
  const std::optional<std::int64_t>& with_context = options.prefill_tokens_with_context;
  if (with_context && (*with_context < 0 || *with_context > tokens)) {
    raise(ErrorCategory::invalid_argument, "--prefill-tokens-with-context must be between 0 and the " +
                                               std::to_string(tokens) + " tokens, got " +
                                               std::to_string(*with_context));
  }
  if (heads == 0 || dv == 0) raise(ErrorCategory::invalid_argument, "heads and V must be positive");
  // The merge does not depend on dqk; the dims only serve backend selection.
  MlaDims dims{deepseek_dims.qk_nope_head_dim, deepseek_dims.qk_rope_head_dim, static_cast<int>(dv)};
  if (options.dims) {
    dims = parse_dims(*options.dims, "--dims");
    if (dims.v_head_dim != dv) {
      raise(ErrorCategory::invalid_argument, "--dims " + *options.dims + " gives V=" + std::to_string(dims.v_head_dim) +
                                                 " but the outputs have V=" + std::to_string(dv));
    }
  }

  Selector selector = options.selection.make_selector();
  const SelectorConfig request{DType::bfloat16, dims};
  const Selection selection = selector.select(request, current_platform());
  BackendParams params;
  params.num_heads = static_cast<int>(heads);
  params.dims = dims;
  const std::unique_ptr<PrefillBackend> backend = selector.create(selection, params);
  Queue queue = make_queue(selection);

  // The states stay float32: the merge math is fp32 (docs/contract.md §3).
  const DType f32 = DType::float32;
  OwnedTensor prefix_out_dev = upload(queue, prefix_out.values, f32, {tokens, heads, dv});
  OwnedTensor prefix_lse_dev = upload(queue, prefix_lse.values, f32, {heads, tokens});
  OwnedTensor suffix_out_dev = upload(queue, suffix_out.values, f32, {tokens, heads, dv});
  OwnedTensor suffix_lse_dev = upload(queue, suffix_lse.values, f32, {heads, tokens});
  OwnedTensor out_dev = OwnedTensor::device(queue, f32, {tokens, heads, dv});
  OwnedTensor out_lse_dev = OwnedTensor::device(queue, f32, {heads, tokens});

  MergeArgs args;
  args.prefix_out = prefix_out_dev.view;
  args.prefix_lse = prefix_lse_dev.view;
  args.suffix_out = suffix_out_dev.view;
  args.suffix_lse = suffix_lse_dev.view;
  args.out = out_dev.view;
  args.out_lse = out_lse_dev.view;
  args.prefill_tokens_with_context = with_context;
  backend->merge_attn_states(queue, args);
  queue.wait();

  save_float_tensor(options.out, {tokens, heads, dv}, download(queue, out_dev.view));
  save_float_tensor(options.out_lse, {heads, tokens}, download(queue, out_lse_dev.view));
  std::cout << "mla-prefill: merged with " << backend->name() << " on the " << queue.describe() << " (" << selection.why
            << "): " << tokens << " tokens, " << heads << " heads, V=" << dv << '\n';
  return exit_success;
}

}  // namespace

Command add_merge_command(CLI::App& parent) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* app = parent.add_subcommand("merge", "Merge two partial attention states (output + LSE)");
  options->selection.add_to(*app);
  app->add_option("--prefix-out", options->prefix_out, "prefix output [N, H, V], float32 or float16 .npy")->required();
  app->add_option("--prefix-lse", options->prefix_lse, "prefix LSE [H, N], natural log")->required();
  app->add_option("--suffix-out", options->suffix_out, "suffix output [N, H, V]")->required();
  app->add_option("--suffix-lse", options->suffix_lse, "suffix LSE [H, N]")->required();
  add_optional(*app, "--prefill-tokens-with-context", options->prefill_tokens_with_context,
               "tokens from this index on have no context: their suffix state is copied");
  add_optional(*app, "--dims", options->dims, "MLA dims P,R,V for backend selection (default 128,64,V)");
  app->add_option("--out", options->out, "merged output [N, H, V], written as float32 .npy")->required();
  app->add_option("--out-lse", options->out_lse, "merged LSE [H, N], float32 .npy")->required();
  return {app, [options] { return run_merge(*options); }};
}

}  // namespace mla::tools
