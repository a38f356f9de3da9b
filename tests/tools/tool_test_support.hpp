// Support for the mla-prefill command tests: running the built command as a
// child process, a scratch directory, .npy inputs, and the in-process
// REFERENCE results the command's outputs are compared with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mla/mla.hpp"
#include "npy.hpp"

namespace mla::tools::test {

struct ToolResult {
  int exit_code = -1;  // 128 + signal when the command was killed
  std::string out;
  std::string err;
};

// Runs the command with `args`. The child gets this process's environment
// without any MLA_* variable (so the tests do not depend on the caller's
// setup), plus `env`.
ToolResult run_tool(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});

// A fresh directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Path of `name` inside the directory.
  std::string path(const std::string& name) const { return (root_ / name).string(); }

 private:
  std::filesystem::path root_;
};

// Values from N(0, 1), never all zero; the same seed gives the same values.
std::vector<float> random_values(std::int64_t count, unsigned seed);

// Writes float values as float32 or float16 (rounded) .npy.
void write_floats(const std::string& path, const std::vector<std::int64_t>& shape, const std::vector<float>& values,
                  NpyType type = NpyType::float32);
// Writes integers as int32 or int64 .npy.
void write_integers(const std::string& path, const std::vector<std::int64_t>& values, NpyType type = NpyType::int32);
// Writes raw bytes (for malformed files).
void write_bytes(const std::string& path, const std::string& bytes);
std::vector<float> read_floats(const std::string& path);

// cu_seqlens of per-sequence lengths: {0, l0, l0 + l1, ...}.
std::vector<std::int64_t> cumulative(const std::vector<int>& lengths);

struct Attention {
  std::vector<float> out;  // [Nq, H, V]
  std::vector<float> lse;  // [H, Nq]
};

// The library's REFERENCE backend, in process, on the host queue: the values
// the command must reproduce. Inputs are rounded to `dtype` as the command does.
Attention reference_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int heads, const MlaDims& dims, const std::vector<int>& q_lens,
                              const std::vector<int>& k_lens, bool causal, float scale, DType dtype,
                              const AttentionMask& mask = {});

// REFERENCE merge_attn_states on float32 states.
Attention reference_merge(const std::vector<float>& prefix_out, const std::vector<float>& prefix_lse,
                          const std::vector<float>& suffix_out, const std::vector<float>& suffix_lse,
                          std::int64_t tokens, int heads, int dv, std::optional<std::int64_t> tokens_with_context);

// ||a - b|| / ||b||, infinite when a holds a NaN.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);
// max |a - b| over entries; equal infinities count as 0, a NaN as infinite.
double max_abs_error(const std::vector<float>& a, const std::vector<float>& b);

// Number of '\n'-terminated lines.
int line_count(const std::string& text);

}  // namespace mla::tools::test
