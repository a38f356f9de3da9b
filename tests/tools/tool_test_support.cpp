#include "tool_test_support.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>

#include "mla/detail/numeric.hpp"

extern char** environ;

namespace mla::tools::test {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// A host tensor holding `values` rounded to `dtype`.
OwnedTensor host_tensor(Queue& queue, const std::vector<float>& values, DType dtype,
                        std::initializer_list<std::int64_t> shape) {
  OwnedTensor tensor = OwnedTensor::host(queue, dtype, shape);
  if (static_cast<std::size_t>(tensor.view.numel()) != values.size()) throw std::logic_error("host_tensor: size");
  for (std::size_t i = 0; i < values.size(); ++i) {
    store_from_float(tensor.view.data, dtype, static_cast<std::int64_t>(i), values[i]);
  }
  return tensor;
}

// Row-major float copy of a host view of rank 2 or 3, honouring its strides.
std::vector<float> to_floats(const TensorView& view) {
  std::vector<float> values;
  const std::int64_t d2 = view.rank == 3 ? view.shape[2] : 1;
  for (std::int64_t i = 0; i < view.shape[0]; ++i) {
    for (std::int64_t j = 0; j < view.shape[1]; ++j) {
      for (std::int64_t l = 0; l < d2; ++l)
        values.push_back(load_as_float(view.data, view.dtype, view.offset(i, j, l)));
    }
  }
  return values;
}

}  // namespace

ToolResult run_tool(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("mla_tool_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out";
  const std::string err_path = base.string() + ".err";

  std::vector<std::string> argv_storage{MLA_PREFILL_COMMAND};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_storage;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "MLA_", 4) != 0) env_storage.emplace_back(*entry);
  }
  for (const auto& [name, value] : env) env_storage.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(spawn_error));

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  ToolResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_text(out_path);
  result.err = read_text(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return result;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "mla_tools_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::vector<float> random_values(std::int64_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& value : values) value = normal(generator);
  return values;
}

void write_floats(const std::string& path, const std::vector<std::int64_t>& shape, const std::vector<float>& values,
                  NpyType type) {
  NpyArray array = make_float32_array(shape, values);
  if (type == NpyType::float16) {
    array.type = NpyType::float16;
    array.data.resize(values.size() * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint16_t bits = numeric::float_to_half(values[i]);
      std::memcpy(array.data.data() + 2 * i, &bits, 2);
    }
  }
  write_npy(path, array);
}

void write_integers(const std::string& path, const std::vector<std::int64_t>& values, NpyType type) {
  NpyArray array;
  array.type = type;
  array.shape = {static_cast<std::int64_t>(values.size())};
  const std::size_t width = npy_item_size(type);
  array.data.resize(values.size() * width);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == NpyType::int32) {
      const auto narrow = static_cast<std::int32_t>(values[i]);
      std::memcpy(array.data.data() + width * i, &narrow, width);
    } else {
      std::memcpy(array.data.data() + width * i, &values[i], width);
    }
  }
  write_npy(path, array);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary);
  file << bytes;
}

std::vector<float> read_floats(const std::string& path) { return read_npy(path).to_floats(path); }

std::vector<std::int64_t> cumulative(const std::vector<int>& lengths) {
  std::vector<std::int64_t> cu{0};
  for (int length : lengths) cu.push_back(cu.back() + length);
  return cu;
}

Attention reference_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int heads, const MlaDims& dims, const std::vector<int>& q_lens,
                              const std::vector<int>& k_lens, bool causal, float scale, DType dtype,
                              const AttentionMask& mask) {
  Queue queue = Queue::host();
  BackendParams params;
  params.num_heads = heads;
  params.dims = dims;
  params.dtype = dtype;
  auto backend = builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
  const PrefillMetadata metadata = PrefillMetadata::from_lengths(q_lens, k_lens, causal);
  const std::int64_t nq = metadata.num_q_tokens();
  const std::int64_t nk = metadata.num_k_tokens();
  const OwnedTensor qt = host_tensor(queue, q, dtype, {nq, heads, dims.qk_head_dim()});
  const OwnedTensor kt = host_tensor(queue, k, dtype, {nk, heads, dims.qk_head_dim()});
  const OwnedTensor vt = host_tensor(queue, v, dtype, {nk, heads, dims.v_head_dim});
  backend->prepare(queue, metadata);
  const AttentionResult result = backend->run_new_tokens(queue, qt.view, kt.view, vt.view, scale, true, std::nullopt,
                                                         std::nullopt, std::nullopt, std::nullopt, mask);
  queue.wait();
  return {to_floats(result.out), to_floats(result.lse)};
}

Attention reference_merge(const std::vector<float>& prefix_out, const std::vector<float>& prefix_lse,
                          const std::vector<float>& suffix_out, const std::vector<float>& suffix_lse,
                          std::int64_t tokens, int heads, int dv, std::optional<std::int64_t> tokens_with_context) {
  Queue queue = Queue::host();
  BackendParams params;
  params.num_heads = heads;
  auto backend = builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
  const DType f32 = DType::float32;
  const OwnedTensor po = host_tensor(queue, prefix_out, f32, {tokens, heads, dv});
  const OwnedTensor pl = host_tensor(queue, prefix_lse, f32, {heads, tokens});
  const OwnedTensor so = host_tensor(queue, suffix_out, f32, {tokens, heads, dv});
  const OwnedTensor sl = host_tensor(queue, suffix_lse, f32, {heads, tokens});
  const OwnedTensor out = OwnedTensor::host(queue, f32, {tokens, heads, dv});
  const OwnedTensor out_lse = OwnedTensor::host(queue, f32, {heads, tokens});
  MergeArgs args;
  args.prefix_out = po.view;
  args.prefix_lse = pl.view;
  args.suffix_out = so.view;
  args.suffix_lse = sl.view;
  args.out = out.view;
  args.out_lse = out_lse.view;
  args.prefill_tokens_with_context = tokens_with_context;
  backend->merge_attn_states(queue, args);
  queue.wait();
  return {to_floats(out.view), to_floats(out_lse.view)};
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

double max_abs_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    if (a[i] == b[i]) continue;  // includes equal infinities
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

int line_count(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

}  // namespace mla::tools::test
