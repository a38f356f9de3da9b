#include "bench.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include "mla/error.hpp"
#include "mla/platform.hpp"

namespace mla::tools {

Progress::Progress() : start_(std::chrono::steady_clock::now()), tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::report(const std::string& what) {
  if (std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
  // On a terminal the line is rewritten in place; in a log each run gets a line.
  std::cerr << (tty_ ? "\r\033[K" : "") << "mla-prefill: bench: " << what << (tty_ ? "" : "\n") << std::flush;
  shown_ = tty_;
}

void Progress::finish() {
  if (shown_) std::cerr << "\r\033[K" << std::flush;
}

double median(std::vector<double> samples) {
  if (samples.empty()) raise(ErrorCategory::internal, "median of no samples");
  std::sort(samples.begin(), samples.end());
  const std::size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : 0.5 * (samples[mid - 1] + samples[mid]);
}

double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double max_lse_error(const std::vector<float>& lse, const std::vector<float>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref[i]) || std::isinf(lse[i])) {
      if (lse[i] != ref[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    const double error = std::fabs(static_cast<double>(lse[i]) - ref[i]);
    if (!(error <= worst)) worst = error;  // keeps NaN
  }
  return worst;
}

BenchProblem make_problem(const BenchOptions& options, std::vector<int> context) {
  BenchProblem problem;
  problem.context_lengths = std::move(context);
  if (options.heads) {
    if (*options.heads < 1) {
      raise(ErrorCategory::invalid_argument, "--heads must be at least 1, got " + std::to_string(*options.heads));
    }
    problem.heads = *options.heads;
  }
  if (options.dims) problem.dims = parse_dims(*options.dims, "--dims");
  if (options.dtype) problem.dtype = parse_input_dtype(*options.dtype, "--dtype", /*allow_fp8=*/true);
  if (options.lengths) {
    problem.new_lengths = parse_lengths(*options.lengths, "--lengths");
    problem.context_lengths.assign(problem.new_lengths.size(), 0);  // no cached keys unless --context says so
  }
  if (options.context) {
    problem.context_lengths = parse_lengths(*options.context, "--context");
    if (problem.context_lengths.size() != problem.new_lengths.size()) {
      raise(ErrorCategory::invalid_argument,
            fmt::format("--context gives {} sequence(s) but the batch has {} ({}): one cached length per sequence",
                        problem.context_lengths.size(), problem.new_lengths.size(),
                        options.lengths ? "--lengths" : "the built-in batch"));
    }
  }
  problem.built_in = !options.heads && !options.dims && !options.dtype && !options.lengths && !options.context;
  return problem;
}

bool is_builtin_reference(const ChosenBackend& chosen) {
  return chosen.selection.kind == MlaPrefillBackendKind::REFERENCE && chosen.selection.name == "REFERENCE" &&
         chosen.backend->name() == "REFERENCE";
}

void print_backend_lines(const DeviceCapability& platform, const ChosenBackend& chosen) {
  std::cout << fmt::format("platform   {}\n", describe_platform(platform));
  std::cout << fmt::format("backend    {} ({})\n", chosen.backend->name(), chosen.selection.why);
  if (const std::string kernel = chosen.backend->kernel_info(); !kernel.empty()) {
    std::cout << fmt::format("kernel     {}\n", kernel);
  }
  std::cout << fmt::format("queue      {}\n", chosen.queue.describe());
}

std::string lengths_text(const std::vector<int>& lengths) { return fmt::format("[{}]", fmt::join(lengths, ", ")); }

}  // namespace mla::tools
