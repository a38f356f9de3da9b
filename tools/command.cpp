#include "command.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>

#include "host_fill.hpp"
#include "npy.hpp"

namespace mla::tools {
namespace {

std::optional<LogLevel> log_level_override;

}  // namespace

void set_log_level_override(std::optional<LogLevel> level) { log_level_override = level; }

void SelectionOptions::add_to(CLI::App& app) {
  add_optional(app, "--config", config_path,
               "YAML configuration layered over the built-in defaults (default: $MLA_CONFIG)");
  add_optional(app, "--backend", backend,
               "backend to use, e.g. REFERENCE; beats the configuration and $MLA_PREFILL_BACKEND");
}

void check_softmax_scale(float scale, const char* flag) {
  if (!std::isfinite(scale) || scale <= 0.0f) {
    raise(ErrorCategory::invalid_argument,
          std::string(flag) + " must be a positive finite number, got " + std::to_string(scale));
  }
}

Selector SelectionOptions::make_selector() const {
  Config config = resolve_config(config_path);
  // --log-level is the top layer. Without it the command reports the
  // selection itself, so the library's info lines (the default) become warn.
  const LogLevel configured = config.log_level.value_or(LogLevel::info);
  config.log_level = log_level_override.value_or(configured == LogLevel::info ? LogLevel::warn : configured);
  // --backend is this program's API-level choice: the top layer, above YAML and
  // MLA_PREFILL_BACKEND, and named as the flag in every message.
  if (backend) {
    config.backend = *backend;
    config.backend_origin = ConfigOrigin{"--backend"};
  }
  // The level is set before the plugins load, so their lines follow it too.
  configure(config);
  return Selector(std::move(config));
}

bool is_explicit_choice(const Selector& selector) { return selector.config().backend != "auto"; }

// "A,B,..." as ints; nullopt when any piece is not an int (empty pieces,
// stray characters, overflow).
std::optional<std::vector<int>> split_ints(const std::string& text) {
  std::vector<int> values;
  const char* cursor = text.data();
  const char* end = text.data() + text.size();
  while (true) {
    int value = 0;
    const auto [next, error] = std::from_chars(cursor, end, value);
    if (error != std::errc() || (next != end && *next != ',')) return std::nullopt;
    values.push_back(value);
    if (next == end) return values;
    cursor = next + 1;
  }
}

MlaDims parse_dims(const std::string& text, const char* flag) {
  const std::optional<std::vector<int>> values = split_ints(text);
  if (!values || values->size() != 3 || std::any_of(values->begin(), values->end(), [](int v) { return v <= 0; })) {
    raise(ErrorCategory::invalid_argument,
          std::string(flag) + " must be three positive integers P,R,V (e.g. 128,64,128), got '" + text + "'");
  }
  if (std::int64_t{(*values)[0]} + (*values)[1] > std::numeric_limits<int>::max()) {
    raise(ErrorCategory::invalid_argument, std::string(flag) + ": P + R does not fit an int, got '" + text + "'");
  }
  return MlaDims{(*values)[0], (*values)[1], (*values)[2]};
}

std::vector<int> parse_lengths(const std::string& text, const char* flag) {
  const std::optional<std::vector<int>> lengths = split_ints(text);
  if (!lengths || std::any_of(lengths->begin(), lengths->end(), [](int v) { return v < 0; })) {
    raise(
        ErrorCategory::invalid_argument,
        std::string(flag) + " must be non-negative integers separated by commas (e.g. 4096,0,17), got '" + text + "'");
  }
  std::int64_t total = 0;
  for (int length : *lengths) total += length;
  if (total > std::numeric_limits<std::int32_t>::max()) {
    raise(ErrorCategory::invalid_argument,
          std::string(flag) + " adds up to more tokens than int32 cu_seqlens can index: '" + text + "'");
  }
  return *lengths;
}

DType parse_dtype_and_scale(const std::string& dtype, float scale) {
  const DType parsed = parse_input_dtype(dtype, "--dtype");
  check_softmax_scale(scale, "--scale");
  return parsed;
}

DType parse_input_dtype(const std::string& text, const char* flag, bool allow_fp8) {
  std::optional<DType> dtype;
  try {
    dtype = parse_dtype(text);
  } catch (const Error&) {
    // Replaced below by a message that names the flag and only the types it accepts.
  }
  if (!dtype || (*dtype == DType::float8_e4m3 && !allow_fp8)) {
    raise(ErrorCategory::invalid_argument,
          std::string(flag) +
              (allow_fp8 ? " must be bf16, fp16, fp32 or fp8 (or bfloat16, float16, float32, float8_e4m3)"
                         : " must be bf16, fp16 or fp32 (or bfloat16, float16, float32)") +
              ", got '" + text + "'");
  }
  return *dtype;
}

void check_int_extents(const std::vector<std::int64_t>& shape, const std::string& what) {
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > std::numeric_limits<int>::max()) {
      raise(ErrorCategory::invalid_argument,
            what + ": dimension " + std::to_string(d) + " is " + std::to_string(shape[d]) + ", more than an int holds");
    }
  }
}

HostTensor load_float_tensor(const std::string& path, const char* flag, int rank, const char* layout) {
  const NpyArray array = read_npy(path);
  const std::string what = std::string(flag) + " (" + path + ")";
  if (array.rank() != rank) {
    raise(ErrorCategory::invalid_argument,
          what + ": expected a " + std::to_string(rank) + "-d array " + layout + ", got " + array.describe());
  }
  check_int_extents(array.shape, what);
  HostTensor tensor;
  tensor.values = array.to_floats(what);
  tensor.shape = array.shape;
  return tensor;
}

std::vector<std::int32_t> load_cu_seqlens(const std::string& path, const char* flag, const char* layout) {
  const NpyArray array = read_npy(path);
  const std::string what = std::string(flag) + " (" + path + ")";
  if (array.rank() != 1) {
    raise(ErrorCategory::invalid_argument, what + ": expected a 1-d array " + layout + ", got " + array.describe());
  }
  std::vector<std::int32_t> cu;
  for (std::int64_t value : array.to_integers(what)) {
    if (value < 0 || value > std::numeric_limits<std::int32_t>::max()) {
      raise(ErrorCategory::invalid_argument,
            what + ": value " + std::to_string(value) + " is out of range (0 to 2^31 - 1)");
    }
    cu.push_back(static_cast<std::int32_t>(value));
  }
  return cu;
}

namespace {

// Whether two paths name one file, whether or not it exists yet: each made
// absolute with its links resolved as far as they exist, then compared.
bool same_file(const std::string& a, const std::string& b) {
  const auto resolved = [](const std::string& path) {
    std::error_code error;
    std::filesystem::path full = std::filesystem::weakly_canonical(path, error);
    if (error) full = std::filesystem::absolute(path, error).lexically_normal();
    return full;
  };
  return resolved(a) == resolved(b);
}

}  // namespace

void check_distinct_outputs(const std::vector<std::pair<const char*, std::optional<std::string>>>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const std::optional<std::string>& a = outputs[i].second;
      const std::optional<std::string>& b = outputs[j].second;
      if (!a || !b) continue;
      if (*a == *b || same_file(*a, *b)) {
        raise(ErrorCategory::invalid_argument, std::string(outputs[i].first) + " and " + outputs[j].first +
                                                   " name the same file (" + *a + "): one would overwrite the other");
      }
    }
  }
}

void save_float_tensor(const std::string& path, std::vector<std::int64_t> shape, const std::vector<float>& values) {
  write_npy(path, make_float32_array(std::move(shape), values));
}

OwnedTensor upload(Queue& queue, const std::vector<float>& values, DType dtype,
                   std::initializer_list<std::int64_t> shape) {
  OwnedTensor tensor = OwnedTensor::device(queue, dtype, shape);
  if (static_cast<std::size_t>(tensor.view.numel()) != values.size()) {
    raise(ErrorCategory::internal,
          "upload: " + std::to_string(values.size()) + " values for " + tensor.view.describe());
  }
  std::vector<unsigned char> staging(values.size() * dtype_size(dtype));
  parallel_ranges(static_cast<std::int64_t>(values.size()), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      store_from_float(staging.data(), dtype, i, values[static_cast<std::size_t>(i)]);
    }
  });
  if (!staging.empty()) queue.memcpy(tensor.view.data, staging.data(), staging.size());
  queue.wait();
  return tensor;
}

std::vector<float> download(Queue& queue, const TensorView& view) {
  const std::int64_t count = view.numel();
  if (count == 0) return {};
  // Copy the whole span the view covers, then gather with its strides: a
  // backend may return a padded view (docs/contract.md §1).
  std::int64_t span = 1;
  for (int d = 0; d < view.rank; ++d) span += (view.shape[d] - 1) * view.stride[d];
  std::vector<unsigned char> staging(static_cast<std::size_t>(span) * dtype_size(view.dtype));
  queue.memcpy(staging.data(), view.data, staging.size());
  queue.wait();

  std::vector<float> values(static_cast<std::size_t>(count));
  std::array<std::int64_t, TensorView::max_rank> index{};
  for (std::int64_t flat = 0; flat < count; ++flat) {
    values[static_cast<std::size_t>(flat)] =
        load_as_float(staging.data(), view.dtype, view.offset(index[0], index[1], index[2], index[3]));
    for (int d = view.rank - 1; d >= 0; --d) {  // advance the row-major index
      if (++index[d] < view.shape[d]) break;
      index[d] = 0;
    }
  }
  return values;
}

}  // namespace mla::tools
