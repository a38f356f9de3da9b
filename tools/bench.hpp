// What mla-prefill bench's two problems (attention alone, and the whole MLA
// step with --step) share: progress lines, medians and the error measures
// against REFERENCE.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "mla/mla.hpp"

namespace mla::tools {

struct BenchOptions {
  SelectionOptions selection;
  int repeats = 3;
  std::optional<int> heads;
  std::optional<std::string> lengths, context, dims, dtype;
  bool no_check = false;
  // --step: the whole MLA step (run_mla_prefill) instead of attention alone.
  bool step = false;
  int block_size = 16;
  std::int64_t workspace_tokens = 2048;
  int kv_lora_rank = 512;
  bool fp8_cache = false;
  // --topk / --window: masked new tokens against dense ones (bench_masked.cpp).
  std::optional<int> topk;
  std::optional<int> window;
};

// DeepSeek-V3 prefill at tensor-parallel 8 (16 of 128 heads per rank) unless
// the options change it.
struct BenchProblem {
  bool built_in = true;
  int heads = 16;
  MlaDims dims = deepseek_dims;
  DType dtype = DType::bfloat16;
  std::vector<int> new_lengths{300, 200, 1, 0, 97, 333};     // queries = keys per sequence
  std::vector<int> context_lengths{128, 0, 17, 64, 0, 160};  // cached keys per sequence

  // dqk^-0.5 * mscale^2 with DeepSeek-V3's YaRN mscale = 0.1 * ln(40) + 1.
  float scale() const {
    const double mscale = 0.1 * std::log(40.0) + 1.0;
    return static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(dims.qk_head_dim())));
  }
  // The backend's parameters for this shape; fp8 inputs write bf16.
  BackendParams params() const {
    BackendParams p;
    p.num_heads = heads;
    p.dims = dims;
    p.dtype = dtype;
    if (dtype == DType::float8_e4m3) p.out_dtype = DType::bfloat16;
    return p;
  }
  std::int64_t num_queries() const { return std::accumulate(new_lengths.begin(), new_lengths.end(), std::int64_t{0}); }
  std::int64_t num_context() const {
    return std::accumulate(context_lengths.begin(), context_lengths.end(), std::int64_t{0});
  }
  // docs/contract.md §7: causal H*(dqk+dv)*sum s^2; non-causal 2*H*(dqk+dv)*sum sq*sk.
  double new_token_flops() const {
    double sum = 0;
    for (int s : new_lengths) sum += static_cast<double>(s) * s;
    return heads * static_cast<double>(dims.qk_head_dim() + dims.v_head_dim) * sum;
  }
  double chunk_flops() const {
    double sum = 0;
    for (std::size_t i = 0; i < new_lengths.size(); ++i)
      sum += static_cast<double>(new_lengths[i]) * context_lengths[i];
    return 2.0 * heads * static_cast<double>(dims.qk_head_dim() + dims.v_head_dim) * sum;
  }
};

// The problem of the options: the built-in one with what the flags replace;
// `context` gives the cached lengths of the built-in batch.
BenchProblem make_problem(const BenchOptions& options, std::vector<int> context);

// mla-prefill bench --step (bench_step.cpp).
int run_step_bench(const BenchOptions& options);

// mla-prefill bench --topk / --window (bench_masked.cpp).
int run_masked_bench(const BenchOptions& options);

// Whether the chosen backend is the library's own REFERENCE, the oracle the
// benchmarks check against (not a configured override of its member).
bool is_builtin_reference(const ChosenBackend& chosen);

// The report's platform, backend (and why), kernel and queue lines.
void print_backend_lines(const DeviceCapability& platform, const ChosenBackend& chosen);

// Prints a line per run to stderr once the command has taken more than a second.
class Progress {
 public:
  Progress();
  void report(const std::string& what);
  void finish();

 private:
  std::chrono::steady_clock::time_point start_;
  bool tty_;
  bool shown_ = false;
};

// The median of one or more samples (the mean of the middle two of an even count).
double median(std::vector<double> samples);

// ||out - ref|| / ||ref||; NaN when out holds a NaN.
double relative_error(const std::vector<float>& out, const std::vector<float>& ref);

// Largest |lse - ref|; rows without keys must agree on -inf exactly.
double max_lse_error(const std::vector<float>& lse, const std::vector<float>& ref);

// "[300, 200, 1]"
std::string lengths_text(const std::vector<int>& lengths);

}  // namespace mla::tools
