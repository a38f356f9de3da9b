// Pieces every subcommand of mla-prefill shares: how a subcommand plugs into
// main(), the selection options, loading tensors from .npy files, and moving
// them to and from the backend's queue.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mla/mla.hpp"

namespace mla::tools {

// Exit statuses. Every mla::Error except a device failure or an internal bug
// is the caller's input being wrong (files, flags, configuration, a backend
// that cannot run here), so it exits with usage_error like a bad flag does.
inline constexpr int exit_success = 0;
inline constexpr int exit_failure = 1;      // the work itself failed (device error, bug)
inline constexpr int exit_usage_error = 2;  // bad flags, files, configuration or backend choice

// A subcommand: its CLI11 node and what runs when it was chosen. The action
// runs after parsing, outside CLI11, so main() sees every error it raises.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_backends_command(CLI::App& parent);
Command add_run_command(CLI::App& parent);
Command add_merge_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_step_command(CLI::App& parent);

// An option whose absence differs from an empty value (`--dims ""` is an error,
// not "use the default").
template <class T>
CLI::Option* add_optional(CLI::App& app, const std::string& name, std::optional<T>& target, const std::string& help) {
  return app.add_option_function<T>(
      name, [&target](const T& value) { target = value; }, help);
}

// The --log-level the user gave, if any. Without one the command follows the
// configuration's logging.level, except that info becomes warn: the command
// prints the selection itself, so the library's info lines would repeat it.
void set_log_level_override(std::optional<LogLevel> level);

// --config and --backend, shared by the commands that select a backend.
struct SelectionOptions {
  std::optional<std::string> config_path;  // none: MLA_CONFIG or the built-in defaults
  std::optional<std::string> backend;      // none: the config's choice (MLA_PREFILL_BACKEND, YAML) or auto

  void add_to(CLI::App& app);
  // resolve_config(--config) with --log-level and --backend layered on top as
  // the API choices, applied to the process with configure() (log level,
  // plugins, overrides) and wrapped in a Selector. Called once per command.
  Selector make_selector() const;
};

// A softmax scale given as `flag`: positive and finite, or Error(invalid_argument).
void check_softmax_scale(float scale, const char* flag);

// Whether the backend was named (API, environment or YAML) rather than found by
// walking the priority list.
bool is_explicit_choice(const Selector& selector);

// "P,R,V" as three positive integers; raises Error(invalid_argument) naming `flag`.
MlaDims parse_dims(const std::string& text, const char* flag);
// "L1,L2,..." as one or more non-negative integers whose sum fits int32
// cu_seqlens; raises Error(invalid_argument) naming `flag`.
std::vector<int> parse_lengths(const std::string& text, const char* flag);
// bf16, fp16 or fp32 (and their long names); with `allow_fp8` also fp8
// (float8_e4m3 inputs: bench, which quantises its data, and backends, which
// only validates). run and step read no descales, so they take no fp8.
DType parse_input_dtype(const std::string& text, const char* flag, bool allow_fp8 = false);
// What the computing commands (run, step) check first: --dtype as
// parse_input_dtype reads it and --scale as check_softmax_scale does.
DType parse_dtype_and_scale(const std::string& dtype, float scale);

// A tensor read from a .npy file, widened to float.
struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  std::int64_t size(int dim) const { return shape.at(static_cast<std::size_t>(dim)); }
};

// Token counts, heads, head dims and block sizes are ints in the library: a
// wider extent (an empty array may have one) raises Error(invalid_argument)
// naming `what` and the dimension.
void check_int_extents(const std::vector<std::int64_t>& shape, const std::string& what);
// A float32/float16 array of rank `rank`, every extent within an int;
// `layout` ("[tokens, heads, dqk]") explains the expected shape in messages
// that name `flag`.
HostTensor load_float_tensor(const std::string& path, const char* flag, int rank, const char* layout);
// A 1-d int32/int64 array whose values fit int32 (range checks come later);
// `layout` ("[batch + 1]") explains the expected shape in messages.
std::vector<std::int32_t> load_cu_seqlens(const std::string& path, const char* flag,
                                          const char* layout = "[batch + 1]");
// Raises Error(invalid_argument) when two of the given output flags name the
// same file (the same path, or two paths of one existing file): the second
// write would replace the first. Flags not given are skipped.
void check_distinct_outputs(const std::vector<std::pair<const char*, std::optional<std::string>>>& outputs);
// Writes a float32 array; `shape` must match values.
void save_float_tensor(const std::string& path, std::vector<std::int64_t> shape, const std::vector<float>& values);

// Converts `values` to `dtype` on the host and copies them into a new device
// tensor of `queue`; waits, so the staging memory may go away afterwards.
OwnedTensor upload(Queue& queue, const std::vector<float>& values, DType dtype,
                   std::initializer_list<std::int64_t> shape);
// Copies a (possibly strided) tensor of `queue` back and widens it to float,
// row-major.
std::vector<float> download(Queue& queue, const TensorView& view);

}  // namespace mla::tools
