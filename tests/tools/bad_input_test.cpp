// Every bad input to mla-prefill ends with status 2 and one clear line on
// stderr, "mla-prefill: error: ...": never a crash, a trace, or a partial run.
#include <gtest/gtest.h>

#include "tool_test_support.hpp"

namespace mla::tools::test {
namespace {

constexpr int heads = 2;
constexpr std::int64_t tokens = 7;  // sequences of 3 and 4 tokens
constexpr std::int64_t dqk = 24;
constexpr std::int64_t dv = 16;

// Valid run and merge inputs; each test breaks one of them.
class ToolBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    write_floats(dir_.path("q.npy"), {tokens, heads, dqk}, random_values(tokens * heads * dqk, 1));
    write_floats(dir_.path("k.npy"), {tokens, heads, dqk}, random_values(tokens * heads * dqk, 2));
    write_floats(dir_.path("v.npy"), {tokens, heads, dv}, random_values(tokens * heads * dv, 3));
    write_integers(dir_.path("cu.npy"), {0, 3, 7});
    write_floats(dir_.path("out_state.npy"), {tokens, heads, dv}, random_values(tokens * heads * dv, 4));
    write_floats(dir_.path("lse_state.npy"), {heads, tokens}, random_values(heads * tokens, 5));
  }

  std::string path(const std::string& name) const { return dir_.path(name); }

  // `run` with the valid inputs, `replace` swapping flag values, `extra` appended.
  ToolResult run(const std::map<std::string, std::string>& replace = {}, const std::vector<std::string>& extra = {},
                 const std::map<std::string, std::string>& env = {}) const {
    std::map<std::string, std::string> flags{{"--q", path("q.npy")},
                                             {"--k", path("k.npy")},
                                             {"--v", path("v.npy")},
                                             {"--cu-seqlens-q", path("cu.npy")},
                                             {"--cu-seqlens-k", path("cu.npy")},
                                             {"--scale", "0.2"},
                                             {"--out", path("out.npy")}};
    for (const auto& [flag, value] : replace) flags[flag] = value;
    std::vector<std::string> args{"run"};
    for (const auto& [flag, value] : flags) {
      args.push_back(flag);
      args.push_back(value);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tool(args, env);
  }

  ToolResult merge(const std::map<std::string, std::string>& replace = {},
                   const std::vector<std::string>& extra = {}) const {
    std::map<std::string, std::string> flags{
        {"--prefix-out", path("out_state.npy")}, {"--prefix-lse", path("lse_state.npy")},
        {"--suffix-out", path("out_state.npy")}, {"--suffix-lse", path("lse_state.npy")},
        {"--out", path("merged.npy")},           {"--out-lse", path("merged_lse.npy")}};
    for (const auto& [flag, value] : replace) flags[flag] = value;
    std::vector<std::string> args{"merge"};
    for (const auto& [flag, value] : flags) {
      args.push_back(flag);
      args.push_back(value);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tool(args);
  }

  // Writes a float32 file of `shape` with random values and returns its path.
  std::string floats(const std::string& name, const std::vector<std::int64_t>& shape) const {
    std::int64_t count = 1;
    for (std::int64_t extent : shape) count *= extent;
    write_floats(path(name), shape, random_values(count, 9));
    return path(name);
  }

  // A file with a hand-written header and `payload_bytes` zero bytes.
  std::string raw_npy(const std::string& name, const std::string& header, std::size_t payload_bytes) const {
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(header.size() & 0xff));
    bytes.push_back(static_cast<char>(header.size() >> 8));
    bytes += header + std::string(payload_bytes, '\0');
    write_bytes(path(name), bytes);
    return path(name);
  }

  TempDir dir_;
};

// Status 2, one line on stderr with the prefix, every part of the message present.
void expect_error(const ToolResult& result, const std::vector<std::string>& parts) {
  EXPECT_EQ(result.exit_code, 2) << "stdout: " << result.out << "\nstderr: " << result.err;
  EXPECT_EQ(result.err.rfind("mla-prefill: error: ", 0), 0u) << result.err;
  EXPECT_EQ(line_count(result.err), 1) << result.err;
  for (const std::string& part : parts) {
    EXPECT_NE(result.err.find(part), std::string::npos) << "missing '" << part << "' in: " << result.err;
  }
}

TEST_F(ToolBadInput, ValidInputsRun) {
  // The baseline every other test breaks must itself succeed.
  const ToolResult result = run({}, {"--backend", "REFERENCE", "--causal"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST_F(ToolBadInput, WrongRank) {
  expect_error(run({{"--q", floats("q2.npy", {tokens, heads * dqk})}}),
               {"--q (", "expected a 3-d array [tokens, heads, dqk], got float32[7, 48]"});
}

TEST_F(ToolBadInput, HeadsDisagree) {
  expect_error(run({{"--k", floats("k3.npy", {tokens, heads + 1, dqk})}}), {"heads disagree: --q has 2, --k 3, --v 2"});
}

TEST_F(ToolBadInput, QkDimsDisagree) {
  expect_error(run({{"--k", floats("k25.npy", {tokens, heads, dqk + 1})}}),
               {"dqk disagrees: --q rows have 24 elements, --k rows 25"});
}

TEST_F(ToolBadInput, KeyAndValueTokensDisagree) {
  expect_error(run({{"--v", floats("v8.npy", {tokens + 1, heads, dv})}}), {"--k has 7 tokens but --v has 8"});
}

TEST_F(ToolBadInput, ZeroHeads) {
  expect_error(run({{"--q", floats("q0.npy", {tokens, 0, dqk})},
                    {"--k", floats("k0.npy", {tokens, 0, dqk})},
                    {"--v", floats("v0.npy", {tokens, 0, dv})}}),
               {"heads, dqk and V must be positive"});
}

// Two outputs in one file: the second write would replace the first.
TEST_F(ToolBadInput, OutputsNamingOneFile) {
  expect_error(run({{"--out", path("same.npy")}}, {"--lse", path("same.npy")}), {"--out and --lse name the same file"});
  expect_error(run({{"--out", path("same.npy")}}, {"--lse", path("./same.npy")}),
               {"--out and --lse name the same file"});
  expect_error(merge({{"--out", path("m.npy")}, {"--out-lse", path("m.npy")}}),
               {"--out and --out-lse name the same file"});
}

// A directory where a file is due: status 2, the path named.
TEST_F(ToolBadInput, DirectoryAsInput) { expect_error(run({{"--q", path("")}}), {"cannot read '", "': a directory"}); }

// An empty array may carry an extent an int cannot hold: refused, named as it is.
TEST_F(ToolBadInput, ExtentsBeyondAnInt) {
  const std::string wide =
      raw_npy("wide.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967298, 6), }", 0);
  expect_error(run({{"--q", wide}}), {"--q (", "dimension 1 is 4294967298, more than an int holds"});
}

TEST_F(ToolBadInput, CuSeqlensNotMonotone) {
  write_integers(path("bad_cu.npy"), {0, 5, 3, 7});
  expect_error(run({{"--cu-seqlens-q", path("bad_cu.npy")}}),
               {"--cu-seqlens-q: must be non-decreasing, entry 2 is 3 after 5"});
}

TEST_F(ToolBadInput, CuSeqlensNotStartingAtZero) {
  write_integers(path("bad_cu.npy"), {1, 3, 7});
  expect_error(run({{"--cu-seqlens-k", path("bad_cu.npy")}}), {"--cu-seqlens-k: must start at 0"});
}

TEST_F(ToolBadInput, CuSeqlensBeyondTheTokens) {
  write_integers(path("bad_cu.npy"), {0, 3, 9});
  expect_error(run({{"--cu-seqlens-q", path("bad_cu.npy")}}),
               {"--cu-seqlens-q: last entry 9 does not match the 7 tokens"});
}

TEST_F(ToolBadInput, CuSeqlensOutOfInt32Range) {
  write_integers(path("big.npy"), {0, 3, std::int64_t{1} << 31}, NpyType::int64);
  expect_error(run({{"--cu-seqlens-q", path("big.npy")}}), {"value 2147483648 is out of range (0 to 2^31 - 1)"});
  write_integers(path("negative.npy"), {0, -3, 7}, NpyType::int64);
  expect_error(run({{"--cu-seqlens-k", path("negative.npy")}}), {"--cu-seqlens-k (", "value -3 is out of range"});
}

TEST_F(ToolBadInput, CuSeqlensBatchSizesDisagree) {
  write_integers(path("three.npy"), {0, 3, 5, 7});
  expect_error(run({{"--cu-seqlens-k", path("three.npy")}}), {"--cu-seqlens-q has 3 entries but --cu-seqlens-k has 4"});
}

TEST_F(ToolBadInput, CuSeqlensWrongTypeOrRank) {
  expect_error(run({{"--cu-seqlens-q", floats("cu_float.npy", {3})}}),
               {"--cu-seqlens-q (", "expected an int32 or int64 array, got float32[3]"});
  expect_error(run({{"--cu-seqlens-q", floats("cu_2d.npy", {3, 1})}}), {"expected a 1-d array [batch + 1]"});
  expect_error(
      run({{"--cu-seqlens-q", raw_npy("cu_i2.npy", "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }\n", 6)}}),
      {"unsupported dtype '<i2'"});
}

TEST_F(ToolBadInput, TensorOfIntegers) {
  write_integers(path("q_int.npy"), {1, 2, 3});
  expect_error(run({{"--q", path("q_int.npy")}}), {"--q (", "expected a 3-d array"});
  const std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (7, 2, 24), }\n";
  expect_error(run({{"--q", raw_npy("q_i4.npy", header, 7 * 2 * 24 * 4)}}),
               {"--q (", "expected a float32 or float16 array, got int32[7, 2, 24]"});
}

TEST_F(ToolBadInput, UnsupportedElementTypes) {
  expect_error(run({{"--q", raw_npy("q_f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (7, 2, 24), }\n",
                                    7 * 2 * 24 * 8)}}),
               {"unsupported dtype '<f8'; expected float32 ('<f4') or float16 ('<f2') tensors"});
  expect_error(run({{"--v", raw_npy("v_i1.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (7, 2, 16), }\n",
                                    7 * 2 * 16)}}),
               {"unsupported dtype '|i1'"});
}

TEST_F(ToolBadInput, FortranOrder) {
  expect_error(run({{"--k", raw_npy("k_f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (7, 2, 24), }\n",
                                    7 * 2 * 24 * 4)}}),
               {"k_f.npy: Fortran-order arrays are not supported"});
}

TEST_F(ToolBadInput, MissingFile) {
  expect_error(run({{"--v", path("nowhere.npy")}}), {"cannot open '", "nowhere.npy': No such file"});
}

TEST_F(ToolBadInput, MalformedNpy) {
  write_bytes(path("text.npy"), "q,k,v\n1,2,3\n");
  expect_error(run({{"--q", path("text.npy")}}), {"text.npy: not a valid .npy file: missing the \\x93NUMPY magic"});
  expect_error(
      run({{"--q", raw_npy("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (7, 2, 24), }\n", 100)}}),
      {"short.npy: not a valid .npy file: truncated data: 100 bytes after the header, 1344 expected"});
  expect_error(run({{"--q", raw_npy("header.npy", "{'descr': '<f4', 'shape': (7, 2, 24), }\n", 1344)}}),
               {"bad header: header has no 'fortran_order'"});
}

TEST_F(ToolBadInput, UnknownBackend) {
  expect_error(run({}, {"--backend", "FLASHINFER"}),
               {"Unknown MLA prefill backend: 'FLASHINFER'. Valid options are: REFERENCE, KOKKOS"});
  expect_error(run({}, {}, {{"MLA_PREFILL_BACKEND", "TRTLLM"}}), {"Unknown MLA prefill backend: 'TRTLLM'"});
}

TEST_F(ToolBadInput, ExplicitBackendThatCannotRunHere) {
#ifdef MLA_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA";
#else
  expect_error(run({}, {"--backend", "CUDA_FLASH", "--causal"}, {{"MLA_PLATFORM", "nvidia:9.0"}}),
               {"Selected MLA prefill backend CUDA_FLASH is not valid for this configuration. Reason: [",
                "built without CUDA", "(chosen by --backend)"});
#endif
}

TEST_F(ToolBadInput, BadYaml) {
  write_bytes(path("syntax.yaml"), "backend: [unclosed\n");
  expect_error(run({}, {"--config", path("syntax.yaml")}), {"syntax.yaml:", "YAML syntax error"});
  write_bytes(path("key.yaml"), "backnd: auto\n");
  expect_error(run({}, {"--config", path("key.yaml")}), {"key.yaml:1:1: unknown key 'backnd'"});
  expect_error(run({}, {"--config", path("missing.yaml")}), {"Cannot read configuration file '", "missing.yaml"});
  expect_error(run_tool({"backends"}, {{"MLA_CONFIG", path("syntax.yaml")}}), {"YAML syntax error"});
}

TEST_F(ToolBadInput, BadDims) {
  for (const char* dims : {"16,8", "16,8,16,4", "a,b,c", "16,0,16", "16,-8,16", "16;8;16", ""}) {
    SCOPED_TRACE(dims);
    expect_error(run({}, {"--dims", dims}), {"--dims must be three positive integers P,R,V"});
  }
  expect_error(run({}, {"--dims", "16,16,16"}),
               {"--dims 16,16,16 gives dqk=32, V=16 but the tensors have dqk=24 (last dim of --q) and V=16"});
  expect_error(run_tool({"backends", "--dims", "128,64"}), {"--dims must be three positive integers"});
}

TEST_F(ToolBadInput, BadDtype) {
  for (const char* dtype : {"int8", "fp8", "float64", "BF16x"}) {
    SCOPED_TRACE(dtype);
    expect_error(run({}, {"--dtype", dtype}), {"--dtype must be bf16, fp16 or fp32", dtype});
  }
  // backends validates fp8 inputs too (REFERENCE and KOKKOS take them); run does not (it reads no descales).
  expect_error(run_tool({"backends", "--dtype", "int8"}), {"--dtype must be bf16, fp16, fp32 or fp8", "'int8'"});
}

TEST_F(ToolBadInput, BadScale) {
  expect_error(run({{"--scale", "nan"}}), {"--scale must be a positive finite number"});
  expect_error(run({{"--scale", "-0.5"}}), {"--scale must be a positive finite number"});
  expect_error(run({{"--scale", "abc"}}), {"--scale", "(see mla-prefill --help)"});
}

TEST_F(ToolBadInput, CommandLineErrors) {
  expect_error(run_tool({"run", "--k", path("k.npy")}), {"--q is required"});
  expect_error(run({}, {"--bogus"}), {"--bogus"});
  expect_error(run_tool({}), {"subcommand"});
  expect_error(run_tool({"prefill"}), {"prefill"});
  expect_error(run_tool({"--log-level", "loud", "backends"}), {"Unknown log level: 'loud'"});
}

TEST_F(ToolBadInput, BadPlatformVariable) {
  expect_error(run_tool({"backends"}, {{"MLA_PLATFORM", "tpu:4"}}), {"Invalid MLA_PLATFORM value 'tpu:4'"});
}

TEST_F(ToolBadInput, MergeShapesDisagree) {
  expect_error(merge({{"--suffix-out", floats("so.npy", {tokens, heads, dv + 1})}}),
               {"--prefix-out is [7, 2, 16] but --suffix-out is [7, 2, 17]"});
  expect_error(merge({{"--prefix-lse", floats("pl.npy", {tokens, heads})}}),
               {"--prefix-lse is [7, 2] but the outputs need [heads, tokens] = [2, 7]"});
  expect_error(merge({{"--suffix-lse", floats("sl.npy", {heads, tokens, 1})}}), {"--suffix-lse (", "2-d array"});
  expect_error(merge({}, {"--dims", "128,64,128"}), {"--dims 128,64,128 gives V=128 but the outputs have V=16"});
}

TEST_F(ToolBadInput, MergeTokensWithContextOutOfRange) {
  expect_error(merge({}, {"--prefill-tokens-with-context", "8"}),
               {"--prefill-tokens-with-context must be between 0 and the 7 tokens, got 8"});
  expect_error(merge({}, {"--prefill-tokens-with-context", "-1"}), {"got -1"});
}

TEST_F(ToolBadInput, MergeMissingInput) {
  expect_error(merge({{"--prefix-lse", path("gone.npy")}}), {"cannot open", "gone.npy"});
}

}  // namespace
}  // namespace mla::tools::test
