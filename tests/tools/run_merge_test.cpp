// mla-prefill run and merge, end to end: .npy files in, the command as a
// child process, its outputs compared with REFERENCE computed in this process.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tool_test_support.hpp"

namespace mla::tools::test {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

// A varlen problem written to a scratch directory.
struct RunCase {
  int heads = 3;
  MlaDims dims{16, 8, 24};
  std::vector<int> q_lens, k_lens;
  std::vector<float> q, k, v;

  std::int64_t nq() const { return cumulative(q_lens).back(); }
  std::int64_t nk() const { return cumulative(k_lens).back(); }

  void write(const TempDir& dir, NpyType float_type, NpyType int_type) {
    q = random_values(nq() * heads * dims.qk_head_dim(), 1);
    k = random_values(nk() * heads * dims.qk_head_dim(), 2);
    v = random_values(nk() * heads * dims.v_head_dim, 3);
    if (float_type == NpyType::float16) {  // what the file will hold
      for (auto* values : {&q, &k, &v}) {
        for (float& x : *values) x = round_to_dtype(x, DType::float16);
      }
    }
    write_floats(dir.path("q.npy"), {nq(), heads, dims.qk_head_dim()}, q, float_type);
    write_floats(dir.path("k.npy"), {nk(), heads, dims.qk_head_dim()}, k, float_type);
    write_floats(dir.path("v.npy"), {nk(), heads, dims.v_head_dim}, v, float_type);
    write_integers(dir.path("cu_q.npy"), cumulative(q_lens), int_type);
    write_integers(dir.path("cu_k.npy"), cumulative(k_lens), int_type);
  }

  std::vector<std::string> args(const TempDir& dir) const {
    return {"run",
            "--q",
            dir.path("q.npy"),
            "--k",
            dir.path("k.npy"),
            "--v",
            dir.path("v.npy"),
            "--cu-seqlens-q",
            dir.path("cu_q.npy"),
            "--cu-seqlens-k",
            dir.path("cu_k.npy"),
            "--out",
            dir.path("out.npy")};
  }
};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ToolRun, ExplicitReferenceReproducesTheLibraryBitForBit) {
  TempDir dir;
  RunCase problem;
  // Odd lengths, an empty sequence, and a sequence with fewer keys than
  // queries: with the bottom-right causal mask its first rows see no key.
  problem.q_lens = {5, 0, 17, 1};
  problem.k_lens = {3, 0, 17, 2};
  problem.write(dir, NpyType::float32, NpyType::int32);
  const float scale = 1.0f / std::sqrt(24.0f);
  // A stale output full of NaN must be replaced, not partly kept.
  write_floats(dir.path("out.npy"), {2}, {NAN, NAN});

  const ToolResult result =
      run_tool(problem.args(dir) + std::vector<std::string>{"--backend", "REFERENCE", "--causal", "--dtype", "bf16",
                                                            "--dims", "16,8,24", "--scale", std::to_string(scale),
                                                            "--lse", dir.path("lse.npy")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("ran REFERENCE"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("explicit choice from --backend"), std::string::npos) << result.out;

  const NpyArray out = read_npy(dir.path("out.npy"));
  EXPECT_EQ(out.type, NpyType::float32);
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{problem.nq(), 3, 24}));
  const NpyArray lse = read_npy(dir.path("lse.npy"));
  EXPECT_EQ(lse.shape, (std::vector<std::int64_t>{3, problem.nq()}));

  const Attention expected =
      reference_attention(problem.q, problem.k, problem.v, problem.heads, problem.dims, problem.q_lens, problem.k_lens,
                          true, std::stof(std::to_string(scale)), DType::bfloat16);
  EXPECT_EQ(out.to_floats("out"), expected.out);
  const std::vector<float> lse_values = lse.to_floats("lse");
  EXPECT_EQ(lse_values, expected.lse);
  // Query 0 of sequence 0 sees no key: LSE -inf, output zeros.
  EXPECT_EQ(lse_values[0], -inf);
  EXPECT_EQ(out.to_floats("out")[0], 0.0f);
}

// docs/contract.md §12 from the command line: per-query key positions (-1
// slots, one query with none), a window and sinks give what the library
// gives with the mask HostTopkMask::from_indices builds.
TEST(ToolRun, TopkIndicesWindowAndSinksMatchTheLibrary) {
  TempDir dir;
  RunCase problem;
  problem.q_lens = {5, 9};
  problem.k_lens = {5, 12};
  problem.write(dir, NpyType::float32, NpyType::int32);
  const std::int64_t k = 4;
  std::vector<std::int32_t> indices;
  for (std::int64_t t = 0; t < problem.nq(); ++t) {
    const bool none = t == 2;  // a query that sees no key: output 0, LSE -inf
    for (std::int64_t j = 0; j < k; ++j)
      indices.push_back(none || j == 3 ? -1 : static_cast<std::int32_t>((t * 7 + j * 3) % 5));
  }
  NpyArray index_file;
  index_file.type = NpyType::int32;
  index_file.shape = {problem.nq(), k};
  index_file.data.resize(indices.size() * sizeof(std::int32_t));
  std::memcpy(index_file.data.data(), indices.data(), index_file.data.size());
  write_npy(dir.path("topk.npy"), index_file);
  const std::vector<float> sinks{0.5f, -inf, 2.0f};
  write_floats(dir.path("sinks.npy"), {3}, sinks);
  const float scale = 0.25f;

  const ToolResult result =
      run_tool(problem.args(dir) + std::vector<std::string>{"--backend", "REFERENCE", "--causal", "--dtype", "fp32",
                                                            "--dims", "16,8,24", "--scale", "0.25", "--lse",
                                                            dir.path("lse.npy"), "--topk-indices", dir.path("topk.npy"),
                                                            "--window", "3", "--sinks", dir.path("sinks.npy")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("top-k mask, window 3, sinks"), std::string::npos) << result.out;

  const PrefillMetadata metadata = PrefillMetadata::from_lengths(problem.q_lens, problem.k_lens);
  const HostTopkMask bits = HostTopkMask::from_indices(metadata, indices.data(), k, k);
  AttentionMask mask;
  mask.topk = bits.view();
  mask.window = 3;
  Queue host = Queue::host();
  const OwnedTensor sink_tensor = OwnedTensor::host(host, DType::float32, {3});
  std::memcpy(sink_tensor.view.data, sinks.data(), sinks.size() * sizeof(float));
  mask.sinks = sink_tensor.view;
  const Attention expected = reference_attention(problem.q, problem.k, problem.v, problem.heads, problem.dims,
                                                 problem.q_lens, problem.k_lens, true, scale, DType::float32, mask);
  EXPECT_EQ(read_npy(dir.path("out.npy")).to_floats("out"), expected.out);
  const std::vector<float> lse = read_npy(dir.path("lse.npy")).to_floats("lse");
  EXPECT_EQ(lse, expected.lse);
  EXPECT_EQ(lse[2], -inf);
  // An index past a sequence's keys is refused, naming the token.
  indices[0] = 5;
  std::memcpy(index_file.data.data(), indices.data(), index_file.data.size());
  write_npy(dir.path("topk.npy"), index_file);
  const ToolResult bad = run_tool(problem.args(dir) + std::vector<std::string>{"--scale", "0.25", "--causal",
                                                                               "--topk-indices", dir.path("topk.npy")});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.err.find("token 0"), std::string::npos) << bad.err;
}

TEST(ToolRun, AutoSelectionWithFloat16FilesAndInt64CuSeqlensMatchesReference) {
  TempDir dir;
  RunCase problem;
  problem.heads = 2;
  problem.dims = {32, 64, 40};  // dqk = 96 > 64: the command infers R = 64
  problem.q_lens = {1, 9, 0, 16};
  problem.k_lens = {17, 0, 5, 33};
  problem.write(dir, NpyType::float16, NpyType::int64);
  const ToolResult result = run_tool(problem.args(dir) + std::vector<std::string>{"--dtype", "fp16", "--scale", "0.125",
                                                                                  "--lse", dir.path("lse.npy")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("qk_nope_head_dim=32, qk_rope_head_dim=64, v_head_dim=40"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("non-causal"), std::string::npos) << result.out;

  const Attention expected = reference_attention(problem.q, problem.k, problem.v, problem.heads, problem.dims,
                                                 problem.q_lens, problem.k_lens, false, 0.125f, DType::float16);
  // docs/contract.md §6, fp16; the -inf LSE of the keyless sequence must match exactly.
  EXPECT_LE(relative_error(read_floats(dir.path("out.npy")), expected.out), 2e-3);
  EXPECT_LE(max_abs_error(read_floats(dir.path("lse.npy")), expected.lse), 1e-3);
  EXPECT_EQ(expected.lse[1], -inf);  // sequence 1 has no keys
}

TEST(ToolRun, SmallHeadDimsSplitInHalfAndFloat32Compute) {
  TempDir dir;
  RunCase problem;
  problem.heads = 1;
  problem.dims = {24, 24, 8};  // dqk = 48 <= 64: R = dqk / 2
  problem.q_lens = {7, 2};
  problem.k_lens = {7, 2};
  problem.write(dir, NpyType::float32, NpyType::int32);
  const ToolResult result =
      run_tool(problem.args(dir) +
               std::vector<std::string>{"--backend", "REFERENCE", "--dtype", "fp32", "--causal", "--scale", "0.5"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("qk_nope_head_dim=24, qk_rope_head_dim=24, v_head_dim=8"), std::string::npos) << result.out;
  const Attention expected = reference_attention(problem.q, problem.k, problem.v, problem.heads, problem.dims,
                                                 problem.q_lens, problem.k_lens, true, 0.5f, DType::float32);
  EXPECT_EQ(read_floats(dir.path("out.npy")), expected.out);
}

TEST(ToolMerge, MatchesReferenceMergeAndCopiesTokensWithoutContext) {
  TempDir dir;
  const std::int64_t tokens = 11;
  const int heads = 3, dv = 20;
  const std::int64_t with_context = 8;
  const std::vector<float> prefix_out = random_values(tokens * heads * dv, 11);
  const std::vector<float> suffix_out = random_values(tokens * heads * dv, 12);
  std::vector<float> prefix_lse = random_values(heads * tokens, 13);
  std::vector<float> suffix_lse = random_values(heads * tokens, 14);
  prefix_lse[0] = -inf;  // empty prefix: the suffix alone
  prefix_lse[1] = -inf;  // both empty: 0 and -inf, no NaN
  suffix_lse[1] = -inf;
  suffix_lse[2] = inf;  // +inf counts as empty (docs/contract.md §3)
  write_floats(dir.path("po.npy"), {tokens, heads, dv}, prefix_out);
  write_floats(dir.path("pl.npy"), {heads, tokens}, prefix_lse);
  write_floats(dir.path("so.npy"), {tokens, heads, dv}, suffix_out);
  write_floats(dir.path("sl.npy"), {heads, tokens}, suffix_lse);

  const ToolResult result =
      run_tool({"merge", "--prefix-out", dir.path("po.npy"), "--prefix-lse", dir.path("pl.npy"), "--suffix-out",
                dir.path("so.npy"), "--suffix-lse", dir.path("sl.npy"), "--prefill-tokens-with-context",
                std::to_string(with_context), "--out", dir.path("out.npy"), "--out-lse", dir.path("out_lse.npy")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("merged with"), std::string::npos) << result.out;

  const std::vector<float> out = read_floats(dir.path("out.npy"));
  const std::vector<float> out_lse = read_floats(dir.path("out_lse.npy"));
  const Attention expected =
      reference_merge(prefix_out, prefix_lse, suffix_out, suffix_lse, tokens, heads, dv, with_context);
  EXPECT_LT(relative_error(out, expected.out), 1e-6);
  EXPECT_LT(max_abs_error(out_lse, expected.lse), 1e-6);

  // Independent of REFERENCE: token 0 head 0 has an empty prefix, so it is the
  // suffix; token 1 head 0 is empty on both sides; tokens >= T copy the suffix.
  for (int c = 0; c < dv; ++c) EXPECT_FLOAT_EQ(out[c], suffix_out[c]);
  EXPECT_EQ(out_lse[1], -inf);
  for (int c = 0; c < dv; ++c) EXPECT_EQ(out[heads * dv + c], 0.0f);
  for (std::int64_t t = with_context; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      EXPECT_EQ(out_lse[h * tokens + t], suffix_lse[h * tokens + t]);
      EXPECT_EQ(out[(t * heads + h) * dv], suffix_out[(t * heads + h) * dv]);
    }
  }
}

}  // namespace
}  // namespace mla::tools::test
