// float8_e4m3 q, k and v with descales (docs/contract.md §4-6): the backend
// under test against REFERENCE on the same bytes and descales, and, with
// REFERENCE under test, REFERENCE against the oracle of the dequantized
// inputs. Backends that do not list float8_e4m3 skip with validate()'s
// reasons.
#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <string>
#include <utility>

#include "builtin_entries.hpp"
#include "conformance/conformance_fixture.hpp"
#include "mla/error.hpp"

namespace mla::testing {
namespace {

const std::vector<int> q_lens{1, 0, 17, 6, 33};

std::int64_t total(const std::vector<int>& lens) {
  std::int64_t sum = 0;
  for (int n : lens) sum += n;
  return sum;
}

// Per-head descales of one tensor: values around `typical`, different for
// every head, so a head read with another's descale shows.
std::vector<float> head_descales(int heads, float typical) {
  std::vector<float> values;
  for (int h = 0; h < heads; ++h)
    values.push_back(typical * (0.5f + static_cast<float>(h + 1) / static_cast<float>(heads)));
  return values;
}

std::vector<double> as_doubles(const std::vector<float>& values) { return {values.begin(), values.end()}; }

class Fp8Inputs : public Conformance {
 protected:
  // e4m3 codes over the whole finite range: magnitudes log-uniform from the
  // smallest subnormal (2^-9) to 448, both signs, never zero or NaN, and
  // ±448 (where a saturating quantiser puts everything larger) at least
  // once per tensor.
  HostTensor random_codes(std::vector<std::int64_t> shape) {
    HostTensor tensor(DType::float8_e4m3, std::move(shape));
    auto* codes = static_cast<std::uint8_t*>(tensor.storage());
    std::uniform_int_distribution<int> magnitude(1, 0x7e);  // 0x7f is NaN
    std::bernoulli_distribution negative(0.5);
    const std::size_t n = tensor.storage_bytes();
    for (std::size_t i = 0; i < n; ++i)
      codes[i] = static_cast<std::uint8_t>(magnitude(rng_) | (negative(rng_) ? 0x80 : 0));
    if (n > 0) codes[n / 2] = 0x7e;  // 448
    if (n > 1) codes[n - 1] = 0xfe;  // -448
    if (n > 2) codes[0] = 0x01;      // 2^-9, the smallest subnormal
    return tensor;
  }

  Operands random_fp8(std::int64_t nq, std::int64_t nk) {
    const std::int64_t h = heads();
    Operands ops;
    ops.q = random_codes({nq, h, qk_dim()});
    ops.k = random_codes({nk, h, qk_dim()});
    ops.v = random_codes({nk, h, v_dim()});
    ops.dq = upload(queue_, ops.q);
    ops.dk = upload(queue_, ops.k);
    ops.dv = upload(queue_, ops.v);
    return ops;
  }

  // Descales that bring 448 to about 2 for q, 1.5 for k and 1 for v, near
  // the bf16 suite's data ranges; q's and k's differ, so one used for the
  // other shows.
  std::vector<float> q_heads() const { return head_descales(heads(), 2.0f / 448.0f); }
  std::vector<float> k_heads() const { return head_descales(heads(), 1.5f / 448.0f); }
  std::vector<float> v_heads() const { return head_descales(heads(), 1.0f / 448.0f); }

  // A float32 [H] tensor in queue memory; kept alive in `kept_`.
  Descale on_queue(const std::vector<float>& values) {
    HostTensor host(DType::float32, {static_cast<std::int64_t>(values.size())});
    for (std::size_t i = 0; i < values.size(); ++i) host.set(values[i], static_cast<std::int64_t>(i));
    kept_.push_back(upload(queue_, host));
    return Descale::of(kept_.back().view);
  }
  // The same in host memory, for REFERENCE on the host queue.
  Descale on_host(const std::vector<float>& values) {
    HostTensor& host =
        kept_host_.emplace_back(DType::float32, std::vector<std::int64_t>{static_cast<std::int64_t>(values.size())});
    for (std::size_t i = 0; i < values.size(); ++i) host.set(values[i], static_cast<std::int64_t>(i));
    return Descale::of(host.view());
  }
  InputDescales per_head_on_queue() { return {on_queue(q_heads()), on_queue(k_heads()), on_queue(v_heads())}; }

  OracleDescales oracle_per_head() const {
    return {as_doubles(q_heads()), as_doubles(k_heads()), as_doubles(v_heads())};
  }

  // The new tokens on both backends with `descales` (REFERENCE gets the
  // same descales as host values when `reference_descales` is given), then
  // the comparisons.
  void check_new_tokens(const std::vector<int>& ql, const std::vector<int>& kl,
                        const std::optional<InputDescales>& descales, const InputDescales& reference_descales,
                        const OracleDescales& oracle_descales, std::optional<float> out_scale = std::nullopt) {
    const PrefillMetadata meta = PrefillMetadata::from_lengths(ql, kl);
    const Operands ops = random_fp8(meta.num_q_tokens(), meta.num_k_tokens());
    const std::int64_t nq = meta.num_q_tokens(), h = heads(), dv = v_dim();
    const DType out_dtype = out_scale ? DType::float8_e4m3 : params_.output_dtype();
    // A padded, poisoned out: only the view may change.
    const std::int64_t row = h * (dv + 16) + 16;
    HostTensor out(out_dtype, {nq, h, dv}, {row, dv + 16, 1}, /*offset=*/16, /*extra=*/row);
    DeviceTensor dout = upload(queue_, out);
    const AttentionPlan plan = backend_->plan(queue_, meta);
    UsmBuffer ws = UsmBuffer::device(queue_, plan.workspace_bytes);
    const Workspace workspace{ws.get(), plan.workspace_bytes};
    backend_->upload_plan(queue_, plan, workspace);
    std::optional<OutputScale> scale_of_out;
    if (out_scale) scale_of_out = OutputScale(*out_scale);
    const AttentionResult result =
        backend_->run_new_tokens(queue_, plan, workspace, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true,
                                 dout.view, scale_of_out, std::nullopt, descales);
    download(queue_, dout, out);
    EXPECT_TRUE(out.padding_untouched());
    reference_->prepare(host_, meta);
    const AttentionResult ref =
        reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true, std::nullopt,
                                   scale_of_out, std::nullopt, reference_descales);
    if (reference_under_test()) {
      std::optional<double> oracle_out_scale;
      if (out_scale) oracle_out_scale = *out_scale;
      EXPECT_TRUE(agrees_with_oracle(
          ref.out, ref.lse,
          oracle_attention(ops.q, ops.k, ops.v, ql, kl, true, scale_, oracle_out_scale, oracle_descales)));
    }
    const HostTensor lse = fetch(result.lse);
    Tolerance bound = tolerance();
    if (out_scale) bound.out_relative = fp8_out_relative;
    EXPECT_TRUE(results_match(out.view(), lse.view(), ref.out, ref.lse, bound));
  }

  // Lists: a descale's view points into its element, which must not move.
  std::list<DeviceTensor> kept_;
  std::list<HostTensor> kept_host_;
};

TEST_P(Fp8Inputs, NewTokensWithHostDescales) {
  const InputDescales descales{2.0f / 448.0f, 1.5f / 448.0f, 1.0f / 448.0f};
  const double q = descales.q.value, k = descales.k.value, v = descales.v.value;
  const std::size_t h = static_cast<std::size_t>(heads());
  check_new_tokens(q_lens, q_lens, descales, descales,
                   {std::vector<double>(h, q), std::vector<double>(h, k), std::vector<double>(h, v)});
}

TEST_P(Fp8Inputs, NewTokensWithPerHeadDescalesInQueueMemory) {
  const InputDescales host{on_host(q_heads()), on_host(k_heads()), on_host(v_heads())};
  check_new_tokens(q_lens, q_lens, per_head_on_queue(), host, oracle_per_head());
}

// Bottom-right causal alignment with more and with fewer keys than queries.
TEST_P(Fp8Inputs, NewTokensBottomRight) {
  const InputDescales host{on_host(q_heads()), on_host(k_heads()), on_host(v_heads())};
  check_new_tokens({5, 9, 0, 3}, {12, 4, 7, 3}, per_head_on_queue(), host, oracle_per_head());
}

TEST_P(Fp8Inputs, Fp8Output) {
  if (!backend_->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor))
    GTEST_SKIP() << backend_->name() << " does not write fp8 output";
  const InputDescales host{on_host(q_heads()), on_host(k_heads()), on_host(v_heads())};
  check_new_tokens(q_lens, q_lens, per_head_on_queue(), host, oracle_per_head(), 0.004f);
}

// Without descales every one is 1: the same bits as descales of 1, given in
// every form (a host value, a 0-d tensor, a [1] tensor).
TEST_P(Fp8Inputs, AbsentDescalesAreOnesInEveryForm) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  const Operands ops = random_fp8(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  const HostTensor none =
      fetch(backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true).out);
  Descale zero_d = on_queue({1.0f});
  zero_d.values.rank = 0;
  const InputDescales forms{1.0f, zero_d, on_queue({1.0f})};
  const HostTensor given = fetch(backend_
                                     ->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true,
                                                      std::nullopt, std::nullopt, std::nullopt, forms)
                                     .out);
  ASSERT_EQ(none.storage_bytes(), given.storage_bytes());
  EXPECT_EQ(0, std::memcmp(none.storage(), given.storage(), none.storage_bytes()));
}

// One value given as a host float, a 0-d tensor and an [H] tensor of
// copies: the same bits.
TEST_P(Fp8Inputs, OneDescaleInEveryFormGivesTheSameBits) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  const Operands ops = random_fp8(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  const float value = 3.0f / 448.0f;
  auto run = [&](const InputDescales& d) {
    return fetch(backend_
                     ->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, std::nullopt,
                                      std::nullopt, std::nullopt, d)
                     .out);
  };
  const HostTensor host = run({value, value, value});
  Descale zero_d = on_queue({value});
  zero_d.values.rank = 0;
  const std::vector<float> copies(static_cast<std::size_t>(heads()), value);
  const HostTensor tensors = run({zero_d, on_queue({value}), on_queue(copies)});
  ASSERT_EQ(host.storage_bytes(), tensors.storage_bytes());
  EXPECT_EQ(0, std::memcmp(host.storage(), tensors.storage(), host.storage_bytes()));
}

TEST_P(Fp8Inputs, ContextChunk) {
  PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  const std::vector<int> chunk{5, 0, 40, 0, 17};
  meta.add_chunk(chunk);
  const Operands ops = random_fp8(meta.num_q_tokens(), total(chunk));
  backend_->prepare(queue_, meta);
  const AttentionResult result = backend_->run_context_chunk(queue_, 0, ops.dq.view, ops.dk.view, ops.dv.view, scale_,
                                                             std::nullopt, std::nullopt, per_head_on_queue());
  reference_->prepare(host_, meta);
  const InputDescales host{on_host(q_heads()), on_host(k_heads()), on_host(v_heads())};
  const AttentionResult ref = reference_->run_context_chunk(host_, 0, ops.q.view(), ops.k.view(), ops.v.view(), scale_,
                                                            std::nullopt, std::nullopt, host);
  if (reference_under_test()) {
    EXPECT_TRUE(agrees_with_oracle(
        ref.out, ref.lse,
        oracle_attention(ops.q, ops.k, ops.v, q_lens, chunk, false, scale_, std::nullopt, oracle_per_head())));
  }
  EXPECT_TRUE(matches(result, ref));
}

// run_prefill_step over two context chunks, one descale per tensor for the
// whole step, equals REFERENCE's one causal pass over context + new tokens.
TEST_P(Fp8Inputs, ChunkedStepEqualsSinglePass) {
  const std::vector<std::vector<int>> chunk_lens{{5, 0, 40, 0, 17}, {0, 3, 11, 1, 0}};
  PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  std::vector<Operands> chunks;
  for (const auto& lens : chunk_lens) {
    meta.add_chunk(lens);
    chunks.push_back(random_fp8(0, total(lens)));
  }
  const Operands ops = random_fp8(meta.num_q_tokens(), meta.num_k_tokens());
  std::vector<TensorView> chunk_k, chunk_v;
  for (const Operands& c : chunks) {
    chunk_k.push_back(c.dk.view);
    chunk_v.push_back(c.dv.view);
  }
  const AttentionResult result = run_prefill_step(*backend_, queue_, meta, ops.dq.view, ops.dk.view, ops.dv.view,
                                                  chunk_k, chunk_v, scale_, per_head_on_queue());
  // The single pass: each sequence's chunk keys, then its new keys.
  std::vector<int> full_lens;
  const std::vector<std::vector<int>> part_lens{chunk_lens[0], chunk_lens[1], q_lens};
  const HostTensor full_k =
      concat_context(DType::float8_e4m3, {&chunks[0].k, &chunks[1].k, &ops.k}, part_lens, full_lens);
  const HostTensor full_v =
      concat_context(DType::float8_e4m3, {&chunks[0].v, &chunks[1].v, &ops.v}, part_lens, full_lens);
  reference_->prepare(host_, PrefillMetadata::from_lengths(q_lens, full_lens));
  const InputDescales host{on_host(q_heads()), on_host(k_heads()), on_host(v_heads())};
  const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), full_k.view(), full_v.view(), scale_,
                                                         true, std::nullopt, std::nullopt, std::nullopt, host);
  if (reference_under_test()) {
    EXPECT_TRUE(agrees_with_oracle(
        ref.out, ref.lse,
        oracle_attention(ops.q, full_k, full_v, q_lens, full_lens, true, scale_, std::nullopt, oracle_per_head())));
  }
  EXPECT_TRUE(matches(result, ref));
}

// Every bad descale is refused with Error(invalid_argument) and leaves the
// caller's out as it was.
TEST_P(Fp8Inputs, BadDescalesAreRefusedAndNothingIsWritten) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  const Operands ops = random_fp8(meta.num_q_tokens(), meta.num_k_tokens());
  HostTensor out(params_.output_dtype(), {meta.num_q_tokens(), heads(), v_dim()});
  DeviceTensor dout = upload(queue_, out);
  backend_->prepare(queue_, meta);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> zero_at_last = q_heads();
  zero_at_last.back() = 0.0f;
  std::vector<float> nan_at_first = k_heads();
  nan_at_first.front() = nan;
  HostTensor halves(DType::float16, {heads()});
  halves.fill_random(rng_, 0.5f, 1.0f);
  DeviceTensor d_halves = upload(queue_, halves);
  Descale wrong_rank = on_queue(std::vector<float>(static_cast<std::size_t>(heads()), 1.0f));
  wrong_rank.values.rank = 2;
  wrong_rank.values.shape = {1, heads(), 0, 0};
  wrong_rank.values.stride = {heads(), 1, 0, 0};
  // Per case: the descales, a fragment of the message.
  const std::vector<std::pair<InputDescales, std::string>> cases{
      {{nan, 1.0f, 1.0f}, "q descale must be a finite positive number"},
      {{1.0f, inf, 1.0f}, "k descale must be a finite positive number"},
      {{1.0f, 1.0f, -0.5f}, "v descale must be a finite positive number"},
      {{1.0f, 0.0f, 1.0f}, "k descale must be a finite positive number"},
      {{Descale::of(d_halves.view), 1.0f, 1.0f}, "q descale must be float32 of shape [], [1] or ["},
      {{1.0f, on_queue(std::vector<float>(static_cast<std::size_t>(heads()) + 1, 1.0f)), 1.0f},
       "k descale must be float32 of shape"},
      {{1.0f, 1.0f, wrong_rank}, "v descale must be float32 of shape"},
  };
  auto expect_refused = [&](const InputDescales& d, const std::string& fragment) {
    try {
      backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, dout.view, std::nullopt,
                               std::nullopt, d);
      ADD_FAILURE() << "not refused; expected \"" << fragment << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    HostTensor after = download(queue_, dout.view);
    EXPECT_EQ(0, std::memcmp(after.storage(), out.storage(), out.storage_bytes())) << "out changed: " << fragment;
  };
  for (const auto& [d, fragment] : cases) expect_refused(d, fragment);
  // Values in memory are checked by the backends that read them on the
  // host; a GPU kernel cannot (emulated, it too runs on the host queue).
  if (!gpu_kernel_under_test()) {
    expect_refused({on_queue(zero_at_last), 1.0f, 1.0f},
                   "q descale must be finite and positive; head " + std::to_string(heads() - 1));
    expect_refused({1.0f, on_queue(nan_at_first), 1.0f}, "k descale must be finite and positive; head 0");
  }
  // A descale the call would write over, as [1] and as 0-d (its one element all the same).
  const TensorView inside_out = TensorView::contiguous(dout.view.data, DType::float32, {1}, dout.view.memory);
  expect_refused({1.0f, 1.0f, Descale::of(inside_out)}, "out overlaps v descale");
  Descale zero_d_inside_out = Descale::of(inside_out);
  zero_d_inside_out.values.rank = 0;
  expect_refused({zero_d_inside_out, 1.0f, 1.0f}, "out overlaps q descale");
}

// Parameters: fp8 inputs name a float16 or bfloat16 output; other inputs
// take no descales.
TEST_P(Fp8Inputs, ParametersAndDescalesOfOtherDtypesAreRefused) {
  auto expect_params_refused = [&](std::optional<DType> out_dtype, DType dtype, const std::string& fragment) {
    BackendParams p = params_;
    p.dtype = dtype;
    p.out_dtype = out_dtype;
    try {
      detail::reference_backend_entry().factory(p);
      ADD_FAILURE() << "not refused; expected \"" << fragment << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_params_refused(std::nullopt, DType::float8_e4m3,
                        "need out_dtype float16 or bfloat16 for the output; got none");
  expect_params_refused(DType::float32, DType::float8_e4m3, "got float32");
  expect_params_refused(DType::float8_e4m3, DType::float8_e4m3, "got float8_e4m3");
  expect_params_refused(DType::float16, DType::bfloat16, "out_dtype may differ from dtype only for float8_e4m3");

  BackendParams bf16 = params_;
  bf16.dtype = DType::bfloat16;
  bf16.out_dtype = std::nullopt;
  const auto reference = detail::reference_backend_entry().factory(bf16);
  const PrefillMetadata meta = PrefillMetadata::from_lengths({3}, {3});
  HostTensor q(DType::bfloat16, {3, heads(), qk_dim()}), k(DType::bfloat16, {3, heads(), qk_dim()}),
      v(DType::bfloat16, {3, heads(), v_dim()});
  q.fill_random(rng_, -1.0f, 1.0f);
  k.fill_random(rng_, -1.0f, 1.0f);
  v.fill_random(rng_, -1.0f, 1.0f);
  reference->prepare(host_, meta);
  try {
    reference->run_new_tokens(host_, q.view(), k.view(), v.view(), scale_, true, std::nullopt, std::nullopt,
                              std::nullopt, InputDescales{});
    ADD_FAILURE() << "descales for bfloat16 inputs were not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("descales are for float8_e4m3 q, k and v; the backend's dtype is bfloat16"),
              std::string::npos)
        << e.what();
  }
}

const std::vector<MlaDims> fp8_dims{{128, 64, 128}, {64, 64, 128}, {192, 64, 256}};

auto fp8_shapes() {
  std::vector<ConformanceShape> shapes;
  for (DType out : {DType::bfloat16, DType::float16})
    for (const MlaDims& dims : fp8_dims)
      for (int heads : {1, 4}) shapes.push_back({DType::float8_e4m3, dims, heads, out});
  return ::testing::ValuesIn(shapes);
}

INSTANTIATE_TEST_SUITE_P(Fp8, Fp8Inputs, fp8_shapes(), shape_name);

}  // namespace
}  // namespace mla::testing
