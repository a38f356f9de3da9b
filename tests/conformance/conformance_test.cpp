// The numeric contract (docs/contract.md §1-4), checked against REFERENCE for the
// backend this executable was compiled for. Batches mix empty, length-1 and
// odd-length sequences; caller-supplied outputs are padded and poisoned.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "conformance/conformance_fixture.hpp"

namespace mla::testing {
namespace {

// Query lengths of the sweep batch: empty, length-1 and odd sequences.
const std::vector<int> sweep_q_lens{1, 0, 17, 6, 33};
// Three context chunks of the same batch; zeros give rows without keys, and
// the last chunk is empty altogether.
const std::vector<std::vector<int>> sweep_chunks{{5, 0, 40, 0, 17}, {0, 3, 11, 1, 0}, {0, 0, 0, 0, 0}};

std::int64_t total(const std::vector<int>& lens) {
  std::int64_t sum = 0;
  for (int n : lens) sum += n;
  return sum;
}

TEST_P(Conformance, NewTokensWithLse) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(sweep_q_lens, sweep_q_lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  const AttentionResult result = backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true);
  reference_->prepare(host_, meta);
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, sweep_q_lens, sweep_q_lens, true));
  ASSERT_FALSE(result.lse.empty_view()) << "return_lse=true gave no LSE";
  EXPECT_TRUE(matches(result, ref));
}

TEST_P(Conformance, NewTokensWithoutLse) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(sweep_q_lens, sweep_q_lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  const AttentionResult result = backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, false);
  reference_->prepare(host_, meta);
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, sweep_q_lens, sweep_q_lens, true));
  EXPECT_TRUE(result.lse.empty_view()) << "return_lse=false still gave " << result.lse.describe();
  EXPECT_TRUE(matches(result, ref));
}

TEST_P(Conformance, NewTokensStridedInputs) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(sweep_q_lens, sweep_q_lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens(), /*strided=*/true);
  backend_->prepare(queue_, meta);
  const AttentionResult result = backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true);
  reference_->prepare(host_, meta);
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, sweep_q_lens, sweep_q_lens, true));
  EXPECT_TRUE(matches(result, ref));
}

// The caller's out has padded heads and rows plus spare rows after the last
// token; all of it starts as NaN and only the view may change.
TEST_P(Conformance, NewTokensIntoPaddedOut) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(sweep_q_lens, sweep_q_lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  const std::int64_t nq = meta.num_q_tokens(), h = heads(), dv = v_dim();
  // Padding in multiples of 16 elements keeps every row 16-byte aligned.
  const std::int64_t row = h * (dv + 16) + 16;
  HostTensor out(dtype(), {nq, h, dv}, {row, dv + 16, 1}, /*offset=*/16, /*extra=*/3 * row);
  DeviceTensor dout = upload(queue_, out);
  backend_->prepare(queue_, meta);
  const AttentionResult result =
      backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, dout.view);
  EXPECT_EQ(result.out.data, dout.view.data) << "the caller's out was not used";
  download(queue_, dout, out);
  reference_->prepare(host_, meta);
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, sweep_q_lens, sweep_q_lens, true));
  const HostTensor lse = fetch(result.lse);
  EXPECT_TRUE(results_match(out.view(), lse.view(), ref.out, ref.lse, tolerance()));
  EXPECT_TRUE(out.padding_untouched());
}

// More keys than queries (bottom-right causal) and fewer keys than queries
// (the first queries see nothing: 0 and -inf). out and lse are the caller's
// and start as NaN, so rows without keys must be written, not left alone.
TEST_P(Conformance, NewTokensBottomRightCausal) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths({3, 1, 5, 0, 2, 9}, {7, 1, 2, 4, 2, 30});
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  const DeviceTensor out = upload(queue_, HostTensor(dtype(), {meta.num_q_tokens(), heads(), v_dim()}));
  const DeviceTensor lse = upload(queue_, HostTensor(DType::float32, {heads(), meta.num_q_tokens()}));
  backend_->prepare(queue_, meta);
  const AttentionResult result = backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true,
                                                          out.view, std::nullopt, lse.view);
  EXPECT_EQ(result.out.data, out.view.data) << "the caller's out was not used";
  reference_->prepare(host_, meta);
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, {3, 1, 5, 0, 2, 9}, {7, 1, 2, 4, 2, 30}, true));
  EXPECT_TRUE(matches(result, ref));
}

TEST_P(Conformance, NewTokensFp8Output) {
  if (!backend_->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor))
    GTEST_SKIP() << backend_->name() << " does not write fp8 output";
  const PrefillMetadata meta = PrefillMetadata::from_lengths(sweep_q_lens, sweep_q_lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  const Tolerance fp8{fp8_out_relative, tolerance().lse_absolute};
  backend_->prepare(queue_, meta);
  reference_->prepare(host_, meta);
  // 0.02 keeps |out| / scale below 50; 0.0015 pushes values past 448, where
  // the conversion must saturate.
  for (float scale : {0.02f, 0.0015f}) {
    SCOPED_TRACE("out_scale " + std::to_string(scale));
    const AttentionResult result =
        backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, std::nullopt, scale);
    EXPECT_EQ(result.out.dtype, DType::float8_e4m3);
    const AttentionResult ref =
        reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true, std::nullopt, scale);
    EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, sweep_q_lens, sweep_q_lens, true, scale));
    EXPECT_TRUE(matches(result, ref, fp8));

    // The same scale held in queue memory, read by the kernel: the same bytes.
    UsmBuffer device_scale = UsmBuffer::device(queue_, sizeof(float));
    queue_.memcpy(device_scale.get(), &scale, sizeof(float));
    const AttentionResult from_device =
        backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, std::nullopt,
                                 OutputScale::on_device(device_scale.as<const float>()));
    const HostTensor a = fetch(result.out), b = fetch(from_device.out);
    ASSERT_EQ(a.storage_bytes(), b.storage_bytes());
    EXPECT_EQ(std::memcmp(a.storage(), b.storage(), a.storage_bytes()), 0) << "a device scale changed the output";
  }
}

TEST_P(Conformance, ContextChunksWithEmptyRows) {
  PrefillMetadata meta = PrefillMetadata::from_lengths(sweep_q_lens, sweep_q_lens);
  for (const auto& lens : sweep_chunks) meta.add_chunk(lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  reference_->prepare(host_, meta);
  for (std::size_t c = 0; c < sweep_chunks.size(); ++c) {
    SCOPED_TRACE("chunk " + std::to_string(c));
    const std::int64_t nk = total(sweep_chunks[c]);
    Operands chunk = random_operands(0, nk, /*strided=*/c == 1);
    const int index = static_cast<int>(c);
    // The caller's out and lse, NaN at first: empty rows must be written.
    const DeviceTensor out = upload(queue_, HostTensor(dtype(), {meta.num_q_tokens(), heads(), v_dim()}));
    const DeviceTensor lse = upload(queue_, HostTensor(DType::float32, {heads(), meta.num_q_tokens()}));
    const AttentionResult result = backend_->run_context_chunk(queue_, index, ops.dq.view, chunk.dk.view, chunk.dv.view,
                                                               scale_, out.view, lse.view);
    EXPECT_EQ(result.lse.data, lse.view.data) << "the caller's lse was not used";
    const AttentionResult ref =
        reference_->run_context_chunk(host_, index, ops.q.view(), chunk.k.view(), chunk.v.view(), scale_);
    EXPECT_TRUE(reference_attention_exact(ref, ops.q, chunk.k, chunk.v, sweep_q_lens, sweep_chunks[c], false));
    ASSERT_FALSE(result.lse.empty_view()) << "a context chunk must return its LSE";
    EXPECT_TRUE(matches(result, ref));
  }
}

// Merge inputs: random outputs and LSEs with every special case of docs/contract.md
// §3 on rows t < `special_below`: prefix or suffix empty (-inf), FA2-style
// +inf, both empty.
struct MergeInputs {
  HostTensor prefix_out, suffix_out, prefix_lse, suffix_lse;
  DeviceTensor d_prefix_out, d_suffix_out, d_prefix_lse, d_suffix_lse;
};

class MergeConformance : public Conformance {
 protected:
  static constexpr std::int64_t tokens = 37;

  MergeInputs merge_inputs(std::int64_t special_below) {
    const std::int64_t h = heads(), dv = v_dim();
    MergeInputs in;
    // The prefix is a padded view whose head stride is V + 64: 192 for V = 128,
    // the layout vLLM merged as if it were contiguous (PR 42642).
    in.prefix_out = random_tensor({tokens, h, dv}, -1.0f, 1.0f, {h * (dv + 64), dv + 64, 1});
    in.suffix_out = random_tensor({tokens, h, dv}, -1.0f, 1.0f);
    in.prefix_lse = HostTensor(DType::float32, {h, tokens}, {tokens + 8, 1});
    in.suffix_lse = HostTensor(DType::float32, {h, tokens});
    in.prefix_lse.fill_random(rng_, -4.0f, 4.0f);
    in.suffix_lse.fill_random(rng_, -4.0f, 4.0f);
    const float inf = std::numeric_limits<float>::infinity();
    for (std::int64_t t = 0; t < special_below; ++t) {
      for (std::int64_t head = 0; head < h; ++head) {
        switch ((t + head) % 8) {
          case 0:
            in.prefix_lse.set(-inf, head, t);
            break;
          case 1:
            in.suffix_lse.set(-inf, head, t);
            break;
          case 2:
            in.prefix_lse.set(-inf, head, t), in.suffix_lse.set(-inf, head, t);
            break;
          case 3:
            in.prefix_lse.set(inf, head, t);
            break;
          case 4:
            in.suffix_lse.set(inf, head, t);
            break;
          case 5:
            in.prefix_lse.set(inf, head, t), in.suffix_lse.set(-inf, head, t);
            break;
          case 6:
            in.prefix_lse.set(30.0f, head, t), in.suffix_lse.set(-30.0f, head, t);
            break;
          default:
            break;
        }
      }
    }
    in.d_prefix_out = upload(queue_, in.prefix_out);
    in.d_suffix_out = upload(queue_, in.suffix_out);
    in.d_prefix_lse = upload(queue_, in.prefix_lse);
    in.d_suffix_lse = upload(queue_, in.suffix_lse);
    return in;
  }

  // Merges on both backends into padded, poisoned outputs and compares.
  // With `device_scale` the backend reads out_scale from queue memory.
  // With `sinks` (one per head, §12) both merges take them.
  void check_merge(const MergeInputs& in, DType out_dtype, std::optional<float> out_scale,
                   std::optional<std::int64_t> cutoff, bool with_lse, bool device_scale = false,
                   const std::vector<float>& sinks = {}) {
    const std::int64_t h = heads(), dv = v_dim();
    const std::int64_t row = h * (dv + 16) + 16;  // 16-byte aligned rows even for fp8
    HostTensor out(out_dtype, {tokens, h, dv}, {row, dv + 16, 1}, 0, 2 * row);
    HostTensor out_lse(DType::float32, {h, tokens}, {tokens + 3, 1}, 0, 5);
    DeviceTensor d_out = upload(queue_, out);
    DeviceTensor d_out_lse = upload(queue_, out_lse);
    MergeArgs args;
    args.prefix_out = in.d_prefix_out.view;
    args.prefix_lse = in.d_prefix_lse.view;
    args.suffix_out = in.d_suffix_out.view;
    args.suffix_lse = in.d_suffix_lse.view;
    args.out = d_out.view;
    if (with_lse) args.out_lse = d_out_lse.view;
    args.prefill_tokens_with_context = cutoff;
    UsmBuffer scale_buffer;
    if (out_scale) args.out_scale = *out_scale;
    if (out_scale && device_scale) {
      scale_buffer = UsmBuffer::device(queue_, sizeof(float));
      queue_.memcpy(scale_buffer.get(), &*out_scale, sizeof(float));
      args.out_scale = OutputScale::on_device(scale_buffer.as<const float>());
    }
    HostTensor host_sinks(DType::float32, {h});
    for (std::int64_t head = 0; head < h && !sinks.empty(); ++head)
      host_sinks.set(sinks[static_cast<std::size_t>(head)], head);
    const DeviceTensor d_sinks = upload(queue_, host_sinks);
    if (!sinks.empty()) args.sinks = d_sinks.view;
    backend_->merge_attn_states(queue_, args);
    download(queue_, d_out, out);
    download(queue_, d_out_lse, out_lse);

    HostTensor ref_out(out_dtype, {tokens, h, dv});
    HostTensor ref_lse(DType::float32, {h, tokens});
    MergeArgs ref_args{in.prefix_out.view(),
                       in.prefix_lse.view(),
                       in.suffix_out.view(),
                       in.suffix_lse.view(),
                       ref_out.view(),
                       ref_lse.view(),
                       cutoff,
                       out_scale ? std::optional<OutputScale>(*out_scale) : std::nullopt};
    if (!sinks.empty()) ref_args.sinks = host_sinks.view();
    reference_->merge_attn_states(host_, ref_args);
    if (reference_under_test()) {
      std::optional<double> scale_of_out;
      if (out_scale) scale_of_out = *out_scale;
      EXPECT_TRUE(agrees_with_oracle(ref_out.view(), ref_lse.view(),
                                     oracle_merge(in.prefix_out, in.prefix_lse, in.suffix_out, in.suffix_lse, cutoff,
                                                  scale_of_out, std::vector<double>(sinks.begin(), sinks.end()))));
    }

    // LSEs are fp32 in and out whatever the dtype: only fp32 rounding separates them.
    const Tolerance tol{out_scale ? fp8_out_relative : tolerance().out_relative, 1e-4};
    EXPECT_TRUE(
        results_match(out.view(), with_lse ? out_lse.view() : TensorView{}, ref_out.view(), ref_lse.view(), tol));
    EXPECT_TRUE(out.padding_untouched());
    EXPECT_TRUE(out_lse.padding_untouched());
    if (!with_lse) {
      HostTensor untouched(DType::float32, {h, tokens}, {tokens + 3, 1}, 0, 5);
      EXPECT_EQ(std::memcmp(out_lse.storage(), untouched.storage(), out_lse.storage_bytes()), 0)
          << "out_lse was not requested but memory was written";
    }
  }
};

TEST_P(MergeConformance, EveryLseCase) {
  const MergeInputs in = merge_inputs(tokens);
  check_merge(in, dtype(), std::nullopt, std::nullopt, true);
}

// An empty side (LSE -inf or +inf) has weight 0 and is not read: NaN in its
// rows (what an unwritten partial may hold) must not reach the output, as in
// REFERENCE, whose merge skips a zero weight.
TEST_P(MergeConformance, EmptySideIsNeverRead) {
  MergeInputs in = merge_inputs(tokens);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t head = 0; head < heads(); ++head) {
      for (std::int64_t c = 0; c < v_dim(); ++c) {
        if (std::isinf(in.prefix_lse.at(head, t))) in.prefix_out.set(nan, t, head, c);
        if (std::isinf(in.suffix_lse.at(head, t))) in.suffix_out.set(nan, t, head, c);
      }
    }
  }
  in.d_prefix_out = upload(queue_, in.prefix_out);
  in.d_suffix_out = upload(queue_, in.suffix_out);
  check_merge(in, dtype(), std::nullopt, std::nullopt, true);
}

TEST_P(MergeConformance, TokensPastCutoffCopySuffixWithoutLse) {
  check_merge(merge_inputs(tokens - 9), dtype(), std::nullopt, tokens - 9, false);
  // Every token copies. No special LSEs: a copied +inf is copied as it is.
  check_merge(merge_inputs(0), dtype(), std::nullopt, 0, true);
}

// Sinks (§12) join the merged denominator once, copied tokens included; the
// LSE stays without them. Heads cycle through no sink, small and large ones.
TEST_P(MergeConformance, SinksJoinTheDenominatorOnly) {
  if (!backend_->takes_attention_masks()) GTEST_SKIP() << backend_->name() << " takes no sinks (§12)";
  std::vector<float> sinks;
  const float cycle[] = {-std::numeric_limits<float>::infinity(), 0.5f, 3.0f, -2.0f, 40.0f};
  for (int head = 0; head < heads(); ++head) sinks.push_back(cycle[(head + 1) % 5]);
  check_merge(merge_inputs(tokens), dtype(), std::nullopt, std::nullopt, true, false, sinks);
  check_merge(merge_inputs(tokens - 9), dtype(), std::nullopt, tokens - 9, true, false, sinks);
}

TEST_P(MergeConformance, Fp8Output) {
  if (!backend_->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor))
    GTEST_SKIP() << backend_->name() << " does not write fp8 output";
  const MergeInputs in = merge_inputs(tokens - 5);
  check_merge(in, DType::float8_e4m3, 0.02f, std::nullopt, true);
  check_merge(in, DType::float8_e4m3, 0.0015f, tokens - 5, true);  // saturates past 448
  check_merge(in, DType::float8_e4m3, 0.02f, tokens - 5, true, /*device_scale=*/true);
}

// run_prefill_step with 1, 2 and 3 context chunks equals one causal pass over
// context + new tokens.
TEST_P(Conformance, ChunkedPrefillEqualsSinglePass) {
  for (std::size_t num_chunks = 1; num_chunks <= sweep_chunks.size(); ++num_chunks) {
    SCOPED_TRACE(std::to_string(num_chunks) + " chunk(s)");
    const std::vector<std::vector<int>> chunk_lens(sweep_chunks.begin(), sweep_chunks.begin() + num_chunks);
    EXPECT_TRUE(chunked_prefill_matches(sweep_q_lens, chunk_lens));
  }
}

// Longer sequences (kv lengths 0, 1, 17, 97, 514, 2048) with few heads, so
// that the suite stays fast on CPU backends.
class LongConformance : public Conformance {};

TEST_P(LongConformance, NewTokens) {
  const std::vector<int> lens{97, 0, 1, 514, 17};
  const PrefillMetadata meta = PrefillMetadata::from_lengths(lens, lens);
  Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  const AttentionResult result = backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true);
  reference_->prepare(host_, meta);
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(reference_attention_exact(ref, ops.q, ops.k, ops.v, lens, lens, true));
  EXPECT_TRUE(matches(result, ref));
}

TEST_P(LongConformance, ChunkedPrefill) {
  EXPECT_TRUE(chunked_prefill_matches({16, 1, 0, 63, 8}, {{514, 97, 3, 300, 0}, {1534, 0, 0, 211, 2048}}));
}

const std::vector<MlaDims> sweep_dims{{128, 64, 128}, {64, 64, 128}, {192, 64, 256}};

auto sweep_shapes() {
  std::vector<ConformanceShape> shapes;
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16})
    for (const MlaDims& dims : sweep_dims)
      for (int heads : {1, 4, 16}) shapes.push_back({dtype, dims, heads});
  return ::testing::ValuesIn(shapes);
}

INSTANTIATE_TEST_SUITE_P(Sweep, Conformance, sweep_shapes(), shape_name);
INSTANTIATE_TEST_SUITE_P(Sweep, MergeConformance, sweep_shapes(), shape_name);
INSTANTIATE_TEST_SUITE_P(Long, LongConformance,
                         ::testing::Values(ConformanceShape{DType::float32, deepseek_dims, 2},
                                           ConformanceShape{DType::float16, deepseek_dims, 2},
                                           ConformanceShape{DType::bfloat16, deepseek_dims, 2}),
                         shape_name);

}  // namespace
}  // namespace mla::testing
