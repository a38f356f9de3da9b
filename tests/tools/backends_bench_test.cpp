// mla-prefill backends and bench, end to end as a child process.
#include <gtest/gtest.h>

#include <sstream>

#include "tool_test_support.hpp"

namespace mla::tools::test {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The line of `text` that starts with `prefix`, or "" when there is none.
std::string line_starting_with(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

// A run that failed as the command promises: status 2 and exactly one line on
// stderr, "mla-prefill: error: ..." containing every part.
void expect_one_error_line(const ToolResult& result, const std::vector<std::string>& parts) {
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_EQ(result.err.rfind("mla-prefill: error: ", 0), 0u) << result.err;
  EXPECT_EQ(line_count(result.err), 1) << result.err;
  for (const std::string& part : parts)
    EXPECT_TRUE(contains(result.err, part)) << "missing '" << part << "' in " << result.err;
}

// Tests that expect the host platform say so, so that they hold on GPU machines too.
const std::map<std::string, std::string> host_platform{{"MLA_PLATFORM", "host"}};

TEST(ToolBackends, ListsEveryBackendAndTheHostPlatform) {
  const ToolResult result = run_tool({"backends"}, host_platform);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(line_starting_with(result.out, "platform:").find("host"), 11u) << result.out;
  for (const char* name : {"REFERENCE", "KOKKOS", "CUDA_FLASH", "HIP_FLASH", "HOPPER_FLASH"}) {
    EXPECT_FALSE(line_starting_with(result.out, name).empty()) << name << " missing in\n" << result.out;
  }
  // REFERENCE runs everywhere: available and valid.
  const std::string reference = line_starting_with(result.out, "REFERENCE");
  EXPECT_TRUE(contains(reference, "yes        yes")) << reference;
  EXPECT_TRUE(contains(result.out, "selected:  ")) << result.out;
  EXPECT_TRUE(contains(result.out, "(auto: first valid in the priority list for host")) << result.out;
  EXPECT_TRUE(result.err.empty()) << result.err;
}

TEST(ToolBackends, LibraryLogLinesFollowTheFlagOrTheConfiguration) {
  // Info lines repeat what the command prints, so by default they are hidden...
  EXPECT_TRUE(run_tool({"backends"}).err.empty());
  // ...unless asked for, before or after the subcommand...
  for (const auto& args : {std::vector<std::string>{"--log-level", "info", "backends"},
                           std::vector<std::string>{"backends", "--log-level", "info"}}) {
    const ToolResult result = run_tool(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_TRUE(contains(result.err, "[info] Using ")) << result.err;
  }
  // ...or the configuration asks for more detail than info.
  TempDir dir;
  write_bytes(dir.path("debug.yaml"), "logging:\n  level: debug\n");
  const ToolResult debug = run_tool({"backends", "--config", dir.path("debug.yaml")});
  EXPECT_EQ(debug.exit_code, 0) << debug.err;
  EXPECT_TRUE(contains(debug.err, "[info] Using ")) << debug.err;
  EXPECT_TRUE(run_tool({"--log-level", "error", "backends", "--config", dir.path("debug.yaml")}).err.empty());
}

TEST(ToolBackends, JsonNamesPlatformBackendsAndSelection) {
  const ToolResult result = run_tool({"backends", "--json", "--dtype", "fp16", "--dims", "64,64,128"}, host_platform);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* part : {"\"vendor\": \"host\"", "\"name\": \"REFERENCE\"", "\"name\": \"CUDA_FLASH\"",
                           "\"dtype\": \"float16\"", "\"qk_nope_head_dim\": 64", "\"mode\": \"auto\""}) {
    EXPECT_TRUE(contains(result.out, part)) << part << " missing in\n" << result.out;
  }
  // Brackets balance outside strings, and the document is one object.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < result.out.size(); ++i) {
    const char c = result.out[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(result.out.front(), '{');
}

TEST(ToolBackends, SimulatedHopperRefusesCudaFlashInAHostBuild) {
#ifdef MLA_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA: CUDA_FLASH is not refused for the build";
#else
  const ToolResult result = run_tool({"backends"}, {{"MLA_PLATFORM", "nvidia:9.0"}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(line_starting_with(result.out, "platform:"), "simulated by MLA_PLATFORM=nvidia:9.0"))
      << result.out;
  const std::string hopper = line_starting_with(result.out, "HOPPER_FLASH");
  EXPECT_TRUE(contains(hopper, "no         no")) << hopper;
  EXPECT_TRUE(contains(hopper, "built without CUDA")) << hopper;
  EXPECT_TRUE(contains(hopper, "  1  ")) << "HOPPER_FLASH heads the nvidia 9.0 list: " << hopper;
  const std::string cuda = line_starting_with(result.out, "CUDA_FLASH");
  EXPECT_TRUE(contains(cuda, "built without CUDA")) << cuda;
  EXPECT_TRUE(contains(cuda, "  2  ")) << "CUDA_FLASH is second on 9.0: " << cuda;
  EXPECT_TRUE(contains(result.out, "priority list for nvidia 9.0-9.0")) << result.out;
#endif
}

TEST(ToolBackends, SimulatedAmpereAndBlackwellSayWhyHopperFlashIsNotValid) {
  for (const char* platform : {"nvidia:8.0", "nvidia:10.0"}) {
    const ToolResult result = run_tool({"backends"}, {{"MLA_PLATFORM", platform}});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string hopper = line_starting_with(result.out, "HOPPER_FLASH");
    const std::string capability = std::string(platform).substr(7);
    EXPECT_TRUE(contains(hopper, "compute capability " + capability + " not supported")) << hopper;
    EXPECT_TRUE(contains(hopper, "  -  ")) << "HOPPER_FLASH is in no list of " << platform << ": " << hopper;
    EXPECT_TRUE(contains(line_starting_with(result.out, "CUDA_FLASH"), "  1  ")) << result.out;
    EXPECT_TRUE(contains(result.out, "priority list for nvidia 8.0+")) << result.out;
  }
}

// fp8 inputs on simulated 8.0, 9.0 and gfx90a: each GPU backend says what
// it lacks (CUDA_FLASH on 8.0 and 9.0 and HIP_FLASH on gfx90a the device)
// and HOPPER_FLASH takes the dtype (9.0 has wgmma on e4m3); on 8.0 and
// gfx90a a host backend is selected, and never CUDA_FLASH on 9.0.
TEST(ToolBackends, Fp8InputsSayWhatEachGpuBackendLacks) {
  for (const char* platform : {"nvidia:8.0", "nvidia:9.0", "amd:gfx90a"}) {
    SCOPED_TRACE(platform);
    const ToolResult result = run_tool({"backends", "--dtype", "fp8"}, {{"MLA_PLATFORM", platform}});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string hopper = line_starting_with(result.out, "HOPPER_FLASH");
    EXPECT_FALSE(contains(hopper, "float8_e4m3")) << hopper;
    const std::string hip = line_starting_with(result.out, "HIP_FLASH");
    EXPECT_FALSE(contains(hip, "dtype float8_e4m3 not supported")) << hip;
    EXPECT_EQ(contains(hip, "dtype float8_e4m3: fp8 inputs need CDNA3's fp8 MFMA (gfx940, gfx941, gfx942)"),
              std::string(platform) == "amd:gfx90a")
        << hip;
    const std::string cuda = line_starting_with(result.out, "CUDA_FLASH");
    EXPECT_FALSE(contains(cuda, "dtype float8_e4m3 not supported")) << cuda;
    EXPECT_EQ(contains(cuda, "dtype float8_e4m3: fp8 inputs need compute capability 8.9, or 12.0 and newer"),
              std::string(platform) != "amd:gfx90a")
        << cuda;
    EXPECT_FALSE(contains(line_starting_with(result.out, "REFERENCE"), "not supported")) << result.out;
    const std::string selected = line_starting_with(result.out, "selected:");
    if (std::string(platform) == "nvidia:9.0") {
      EXPECT_FALSE(contains(selected, "CUDA_FLASH")) << result.out;
    } else {
      EXPECT_TRUE(contains(selected, "KOKKOS") || contains(selected, "REFERENCE")) << result.out;
    }
  }
}

TEST(ToolBackends, ExplicitChoiceFromConfigAndEnvironmentShowsAsExplicit) {
  TempDir dir;
  write_bytes(dir.path("ref.yaml"), "backend: REFERENCE\n");
  const ToolResult from_file = run_tool({"backends", "--config", dir.path("ref.yaml")});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_TRUE(contains(line_starting_with(from_file.out, "selected:"), "REFERENCE (explicit: explicit choice from"))
      << from_file.out;

  const ToolResult from_env = run_tool({"backends", "--json"}, {{"MLA_PREFILL_BACKEND", "REFERENCE"}});
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_TRUE(contains(from_env.out, "\"mode\": \"explicit\"")) << from_env.out;
  EXPECT_TRUE(contains(from_env.out, "MLA_PREFILL_BACKEND")) << from_env.out;
}

TEST(ToolBackends, InvalidExplicitChoiceFailsAfterTheTableWithTheReasons) {
#ifdef MLA_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA";
#else
  const ToolResult result = run_tool({"backends"}, {{"MLA_PREFILL_BACKEND", "CUDA_FLASH"}});
  expect_one_error_line(
      result, {"Selected MLA prefill backend CUDA_FLASH is not valid", "built without CUDA", "MLA_PREFILL_BACKEND"});
  EXPECT_FALSE(line_starting_with(result.out, "REFERENCE").empty()) << result.out;
  EXPECT_TRUE(contains(result.out, "selected:  none (explicit)")) << result.out;
#endif
}

TEST(ToolBackends, NoValidAutoCandidateIsReportedNotFailed) {
  TempDir dir;
  write_bytes(dir.path("gpu_only.yaml"), "priorities:\n  - vendor: host\n    backends: [CUDA_FLASH, HIP_FLASH]\n");
#ifdef MLA_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA";
#else
  const ToolResult result = run_tool({"backends", "--config", dir.path("gpu_only.yaml")}, host_platform);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const std::string selected = line_starting_with(result.out, "selected:");
  EXPECT_TRUE(contains(selected, "none (auto): No valid MLA prefill backend found")) << result.out;
  EXPECT_TRUE(contains(selected, "CUDA_FLASH: [")) << selected;
  EXPECT_TRUE(contains(selected, "HIP_FLASH: [")) << selected;
#endif
}

// The row of a phase split into its columns after the name.
std::vector<std::string> bench_columns(const std::string& out, const std::string& phase) {
  std::istringstream row(line_starting_with(out, phase).substr(phase.size()));
  std::vector<std::string> columns;
  for (std::string column; row >> column;) columns.push_back(column);
  return columns;
}

TEST(ToolBench, ReferenceReportsItselfAsTheOracle) {
  const ToolResult result = run_tool({"bench", "--backend", "REFERENCE", "--repeats", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(line_starting_with(result.out, "backend"), "REFERENCE (explicit choice from --backend)"))
      << result.out;
  EXPECT_TRUE(contains(result.out, "H=16, dims (qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128), bfloat16"))
      << result.out;
  EXPECT_TRUE(contains(result.out, "scale 0.135234")) << result.out;
  // GFLOP as docs/contract.md §7 counts them for the built-in batch:
  // new tokens 16 * 320 * (300^2 + 200^2 + 1^2 + 97^2 + 333^2) = 1.2815e9;
  // chunk 2 * 16 * 320 * (300 * 128 + 1 * 17 + 333 * 160) = 0.9390e9.
  const std::vector<std::string> new_tokens = bench_columns(result.out, "new tokens (causal)");
  ASSERT_EQ(new_tokens.size(), 7u) << result.out;  // GFLOP, ms, TFLOP/s, "0 (self)" twice
  EXPECT_EQ(new_tokens[0], "1.282");
  EXPECT_GT(std::stod(new_tokens[1]), 0.0);
  EXPECT_EQ(new_tokens[3] + new_tokens[4], "0(self)");
  const std::vector<std::string> step = bench_columns(result.out, "prefill step (+1 chunk, merge)");
  ASSERT_EQ(step.size(), 7u) << result.out;
  EXPECT_EQ(step[0], "2.221");
}

TEST(ToolBench, AutoSelectedBackendIsCheckedAgainstReference) {
  const ToolResult result = run_tool({"bench", "--repeats", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  if (contains(line_starting_with(result.out, "backend"), "REFERENCE")) {
    EXPECT_TRUE(contains(result.out, "0 (self)")) << result.out;
    return;
  }
  for (const char* phase : {"new tokens (causal)", "prefill step (+1 chunk, merge)"}) {
    const std::vector<std::string> columns = bench_columns(result.out, phase);
    ASSERT_EQ(columns.size(), 5u) << result.out;
    // bf16 bounds of docs/contract.md §6; "nan" parses as NaN and fails both.
    EXPECT_LE(std::stod(columns[3]), 1e-2) << phase;
    EXPECT_LE(std::stod(columns[4]), 1e-2) << phase;
  }
}

TEST(ToolBench, RejectsNonPositiveRepeats) {
  expect_one_error_line(run_tool({"bench", "--repeats", "0"}), {"--repeats must be at least 1, got 0"});
}

TEST(ToolBench, ShapeFromTheOptions) {
  const ToolResult result = run_tool({"bench", "--backend", "REFERENCE", "--repeats", "1", "--heads", "2", "--dims",
                                      "16,8,32", "--dtype", "fp32", "--lengths", "5,0,3", "--context", "2,1,0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "shape from the options")) << result.out;
  EXPECT_TRUE(contains(result.out, "H=2, dims (qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=32), float32"))
      << result.out;
  EXPECT_TRUE(contains(result.out, "new tokens [5, 0, 3] (8 queries); one context chunk [2, 1, 0] (3 keys)"))
      << result.out;
  // docs/contract.md §7: causal 2 * (24 + 32) * (25 + 9) = 3808 flops; the chunk adds
  // 2 * 2 * 56 * (5 * 2) = 2240.
  const std::vector<std::string> new_tokens = bench_columns(result.out, "new tokens (causal)");
  ASSERT_EQ(new_tokens.size(), 7u) << result.out;
  EXPECT_DOUBLE_EQ(std::stod(new_tokens[0]), 0.0);  // 3.8e-6 GFLOP prints as 0.000
  const std::vector<std::string> step = bench_columns(result.out, "prefill step (+1 chunk, merge)");
  ASSERT_EQ(step.size(), 7u) << result.out;
}

TEST(ToolBench, LengthsWithoutContextMeanAnEmptyChunk) {
  const ToolResult result =
      run_tool({"bench", "--backend", "REFERENCE", "--repeats", "1", "--lengths", "7,1", "--heads", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "new tokens [7, 1] (8 queries); one context chunk [0, 0] (0 keys)")) << result.out;
}

TEST(ToolBench, NoCheckSkipsTheReference) {
  const ToolResult result = run_tool({"bench", "--repeats", "1", "--no-check", "--lengths", "33", "--heads", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  if (contains(line_starting_with(result.out, "backend"), "REFERENCE")) GTEST_SKIP() << "REFERENCE selected here";
  EXPECT_TRUE(contains(result.out, "not run (--no-check)")) << result.out;
  const std::vector<std::string> columns = bench_columns(result.out, "new tokens (causal)");
  ASSERT_EQ(columns.size(), 5u) << result.out;
  EXPECT_EQ(columns[3] + columns[4], "--");
}

TEST(ToolBench, BadShapeOptionsAreOneClearError) {
  expect_one_error_line(run_tool({"bench", "--heads", "0"}), {"--heads must be at least 1, got 0"});
  expect_one_error_line(run_tool({"bench", "--lengths", "4,-1"}),
                        {"--lengths must be non-negative integers separated by commas", "'4,-1'"});
  expect_one_error_line(run_tool({"bench", "--lengths", "4,,5"}), {"--lengths must be non-negative integers"});
  expect_one_error_line(run_tool({"bench", "--lengths", "2000000000,2000000000"}),
                        {"--lengths adds up to more tokens than int32 cu_seqlens can index"});
  expect_one_error_line(run_tool({"bench", "--context", "1,2"}),
                        {"--context gives 2 sequence(s) but the batch has 6 (the built-in batch)"});
  expect_one_error_line(run_tool({"bench", "--lengths", "3", "--context", "1,2"}),
                        {"--context gives 2 sequence(s) but the batch has 1 (--lengths)"});
  expect_one_error_line(run_tool({"bench", "--dims", "192,64"}), {"--dims must be three positive integers"});
  expect_one_error_line(run_tool({"bench", "--dtype", "int8"}), {"--dtype must be bf16, fp16, fp32 or fp8", "'int8'"});
  expect_one_error_line(run_tool({"bench", "--step", "--dtype", "fp8"}),
                        {"--dtype fp8 times attention alone: --step does not time the MLA step's FP8"});
}

// --dtype fp8: random data quantised to e4m3 with per-tensor descales from
// the data, checked against REFERENCE on the same bytes and descales, held
// to the bounds of the bf16 output (docs/contract.md §6).
TEST(ToolBench, Fp8InputsAreQuantisedFromTheData) {
  const ToolResult result = run_tool(
      {"bench", "--repeats", "1", "--dtype", "fp8", "--heads", "2", "--lengths", "37,0,5", "--context", "11,3,0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "float8_e4m3 (descales from the data: q ")) << result.out;
  EXPECT_TRUE(contains(result.out, "; output bfloat16)")) << result.out;
  if (contains(line_starting_with(result.out, "backend"), "REFERENCE")) GTEST_SKIP() << "REFERENCE selected here";
  for (const char* phase : {"new tokens (causal)", "prefill step (+1 chunk, merge)"}) {
    const std::vector<std::string> columns = bench_columns(result.out, phase);
    ASSERT_EQ(columns.size(), 5u) << result.out;
    EXPECT_LE(std::stod(columns[3]), 1e-2) << phase;
    EXPECT_LE(std::stod(columns[4]), 1e-2) << phase;
  }
}

// bench --step on a small shape: 2 sequences with context, a workspace that
// splits them into 7 chunks, every phase timed, the output checked.
TEST(ToolBenchStep, TimesEveryPhaseAndChecksTheWholeStep) {
  for (bool fp8 : {false, true}) {
    std::vector<std::string> args{"bench",
                                  "--step",
                                  "--repeats",
                                  "2",
                                  "--heads",
                                  "4",
                                  "--lengths",
                                  "30,0,7",
                                  "--context",
                                  "100,5,0",
                                  "--kv-lora-rank",
                                  "128",
                                  "--workspace-tokens",
                                  "32"};
    if (fp8) args.push_back("--fp8-cache");
    const ToolResult result = run_tool(args);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_TRUE(contains(line_starting_with(result.out, "workspace"), "32 tokens: 7 context chunk(s)")) << result.out;
    EXPECT_EQ(contains(line_starting_with(result.out, "cache"), "fp8 e4m3"), fp8) << result.out;
    // Projection: 2 * (37 + 105) tokens * L 128 * 4 heads * (128 + 128) = 0.0372e9.
    EXPECT_EQ(bench_columns(result.out, "projection").at(0), "0.037") << result.out;
    double shares = 0;
    for (const char* phase : {"gather", "projection", "attention", "merge"}) {
      const std::vector<std::string> columns = bench_columns(result.out, phase);
      ASSERT_EQ(columns.size(), 4u) << phase << "\n" << result.out;
      EXPECT_GT(std::stod(columns[1]), 0.0) << phase;  // every phase ran and was timed
      shares += std::stod(columns[2]);
    }
    EXPECT_GT(shares, 50.0) << result.out;  // medians of phases against the median total
    const std::string errors = line_starting_with(result.out, "output vs REFERENCE");
    if (contains(line_starting_with(result.out, "backend"), "REFERENCE")) {
      EXPECT_TRUE(contains(errors, "0 (self)")) << result.out;
      continue;
    }
    // bf16 bounds of docs/contract.md §6; "nan" parses as NaN and fails both.
    std::istringstream numbers(errors.substr(errors.find("relative error ") + 15));
    std::string relative, rest, lse;
    numbers >> relative >> rest >> rest >> rest >> lse;
    EXPECT_LE(std::stod(relative), 1e-2) << result.out;
    EXPECT_LE(std::stod(lse), 1e-2) << result.out;
  }
}

TEST(ToolBenchStep, BadCacheOptionsAreOneClearError) {
  expect_one_error_line(run_tool({"bench", "--step", "--block-size", "0"}), {"--block-size must be at least 1, got 0"});
  expect_one_error_line(run_tool({"bench", "--step", "--workspace-tokens", "-3"}),
                        {"--workspace-tokens must be at least 1, got -3"});
  expect_one_error_line(run_tool({"bench", "--step", "--kv-lora-rank", "0"}),
                        {"--kv-lora-rank must be at least 1, got 0"});
  // The cache options belong to --step.
  const ToolResult alone = run_tool({"bench", "--block-size", "64"});
  EXPECT_EQ(alone.exit_code, 2) << alone.out << alone.err;
  EXPECT_TRUE(contains(alone.err, "--step")) << alone.err;
}

}  // namespace
}  // namespace mla::tools::test
