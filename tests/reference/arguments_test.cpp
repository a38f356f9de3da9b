// Every bad argument gives Error(invalid_argument) (or not_supported where
// the request is valid but unservable) with a message that names the tensor
// and says what was expected.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "mla/backend/checks.hpp"
#include "reference/reference_helpers.hpp"

namespace mla::testing {
namespace {

template <class Fn>
::testing::AssertionResult raises(Fn&& fn, ErrorCategory category, const std::string& fragment) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.category() != category)
      return ::testing::AssertionFailure() << "category " << category_name(e.category()) << ": " << message;
    if (message.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << fragment << "\"";
    return ::testing::AssertionSuccess() << message;
  }
  return ::testing::AssertionFailure() << "no error; expected \"" << fragment << "\"";
}

constexpr auto invalid = ErrorCategory::invalid_argument;
constexpr MlaDims dims{16, 8, 12};  // dqk 24, V 12

// Four heads, bf16, a batch of 3 + 2 new tokens and one context chunk of 4 + 1 keys.
class Arguments : public ::testing::Test {
 protected:
  void SetUp() override {
    meta_ = PrefillMetadata::from_lengths({3, 2}, {3, 2});
    meta_.add_chunk({4, 1});
    backend_ = make_reference(tiny_params(dims, 4, DType::bfloat16));
  }
  HostTensor make(std::vector<std::int64_t> shape, DType dtype = DType::bfloat16) {
    HostTensor t(dtype, std::move(shape));
    t.fill_random(rng_, -1, 1);
    return t;
  }
  AttentionResult run(const TensorView& q, const TensorView& k, const TensorView& v,
                      std::optional<TensorView> out = std::nullopt, std::optional<float> scale = std::nullopt) {
    backend_->prepare(host_, meta_);
    return backend_->run_new_tokens(host_, q, k, v, 0.2f, true, out, scale);
  }

  std::mt19937_64 rng_{1};
  Queue host_ = Queue::host();
  PrefillMetadata meta_;
  std::unique_ptr<PrefillBackend> backend_;
  HostTensor q_ = make({5, 4, 24}), k_ = make({5, 4, 24}), v_ = make({5, 4, 12});
};

// The softmax scale is each call's: a non-finite one is refused there.
TEST_F(Arguments, ANonFiniteScaleIsRefused) {
  backend_->prepare(host_, meta_);
  EXPECT_TRUE(raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), std::nanf(""), true); },
                     invalid, "scale must be finite; got nan"));
  HostTensor ck = make({5, 4, 24}), cv = make({5, 4, 12});
  EXPECT_TRUE(raises([&] { backend_->run_context_chunk(host_, 0, q_.view(), ck.view(), cv.view(), INFINITY); }, invalid,
                     "scale must be finite; got inf"));
}

TEST_F(Arguments, GoodArgumentsRun) {
  const AttentionResult r = run(q_.view(), k_.view(), v_.view());
  EXPECT_EQ(r.out.dtype, DType::bfloat16);
  EXPECT_EQ(r.out.size(0), 5);
  EXPECT_EQ(r.lse.size(0), 4);
}

TEST_F(Arguments, RunBeforePrepare) {
  EXPECT_TRUE(raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true); }, invalid,
                     "REFERENCE: prepare() must be called before running attention"));
  EXPECT_TRUE(raises([&] { backend_->run_context_chunk(host_, 0, q_.view(), k_.view(), v_.view(), 0.2f); }, invalid,
                     "prepare() must be called"));
}

TEST_F(Arguments, QueryShapeAndDtype) {
  EXPECT_TRUE(raises(
      [&] {
        run(make({5, 8, 24}).view(), k_.view(), v_.view());
      },
      invalid, "q has 8 heads but 4 are expected"));
  EXPECT_TRUE(raises(
      [&] {
        run(make({5, 4, 16}).view(), k_.view(), v_.view());
      },
      invalid, "q has head dim 16 but qk_head_dim is 24"));
  EXPECT_TRUE(raises(
      [&] {
        run(make({6, 4, 24}).view(), k_.view(), v_.view());
      },
      invalid, "q has 6 tokens but cu_seqlens_q needs 5"));
  EXPECT_TRUE(raises(
      [&] {
        run(make({5, 4, 24}, DType::float16).view(), k_.view(), v_.view());
      },
      invalid, "q has dtype float16 but the backend's dtype is bfloat16"));
  EXPECT_TRUE(raises([&] { run(make({5, 96}).view(), k_.view(), v_.view()); }, invalid, "q must have rank 3"));
  EXPECT_TRUE(raises([&] { run(TensorView{}, k_.view(), v_.view()); }, invalid, "q is missing"));
  TensorView no_data = q_.view();
  no_data.data = nullptr;
  EXPECT_TRUE(raises([&] { run(no_data, k_.view(), v_.view()); }, invalid, "q has no data"));
}

TEST_F(Arguments, KeyAndValueShapes) {
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), make({4, 4, 24}).view(), v_.view());
      },
      invalid, "k has 4 tokens but cu_seqlens_k needs 5"));
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), k_.view(), make({6, 4, 12}).view());
      },
      invalid, "v has 6 tokens but cu_seqlens_k needs 5"));
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), k_.view(), make({5, 4, 24}).view());
      },
      invalid, "v has head dim 24 but v_head_dim is 12"));
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), make({5, 4, 24}, DType::float32).view(), v_.view());
      },
      invalid, "k has dtype float32 but the backend's dtype is bfloat16"));
}

TEST_F(Arguments, OutputDtypeShapeAndScale) {
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), k_.view(), v_.view(), make({5, 4, 12}, DType::float32).view());
      },
      invalid, "out has dtype float32 but must be bfloat16"));
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), k_.view(), v_.view(), make({5, 4, 24}).view());
      },
      invalid, "out has head dim 24 but v_head_dim is 12"));
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), k_.view(), v_.view(), make({4, 4, 12}).view());
      },
      invalid, "out has 4 tokens but cu_seqlens_q needs 5"));
  HostTensor fp8(DType::float8_e4m3, {5, 4, 12});
  EXPECT_TRUE(raises([&] { run(q_.view(), k_.view(), v_.view(), fp8.view()); }, invalid,
                     "(a float8_e4m3 out needs out_scale)"));
  EXPECT_TRUE(raises(
      [&] {
        run(q_.view(), k_.view(), v_.view(), make({5, 4, 12}).view(), 0.5f);
      },
      invalid, "out_scale is given, so out must be float8_e4m3; out is bfloat16"));
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    EXPECT_TRUE(raises([&] { run(q_.view(), k_.view(), v_.view(), fp8.view(), bad); }, invalid,
                       "out_scale must be a finite positive number"));
  }
  EXPECT_EQ(run(q_.view(), k_.view(), v_.view(), fp8.view(), 0.5f).out.data, fp8.view().data);
  EXPECT_EQ(run(q_.view(), k_.view(), v_.view(), std::nullopt, 0.5f).out.dtype, DType::float8_e4m3);
}

TEST_F(Arguments, ContextChunk) {
  backend_->prepare(host_, meta_);
  const HostTensor ck = make({5, 4, 24}), cv = make({5, 4, 12});
  EXPECT_TRUE(raises([&] { backend_->run_context_chunk(host_, 1, q_.view(), ck.view(), cv.view(), 0.2f); }, invalid,
                     "chunk_index 1 is out of range: the metadata has 1 context chunks"));
  EXPECT_TRUE(raises([&] { backend_->run_context_chunk(host_, -1, q_.view(), ck.view(), cv.view(), 0.2f); }, invalid,
                     "chunk_index -1 is out of range"));
  EXPECT_TRUE(raises(
      [&] {
        backend_->run_context_chunk(host_, 0, q_.view(), make({4, 4, 24}).view(), cv.view(), 0.2f);
      },
      invalid, "chunk 0 k has 4 tokens but the chunk's cu_seqlens_k needs 5"));
  EXPECT_TRUE(raises(
      [&] {
        backend_->run_context_chunk(host_, 0, q_.view(), ck.view(), make({5, 2, 12}).view(), 0.2f);
      },
      invalid, "chunk 0 v has 2 heads but 4 are expected"));
  EXPECT_NO_THROW(backend_->run_context_chunk(host_, 0, q_.view(), ck.view(), cv.view(), 0.2f));
}

TEST_F(Arguments, Metadata) {
  PrefillMetadata bad = meta_;
  bad.cu_seqlens_q[0] = 1;
  EXPECT_TRUE(raises([&] { backend_->prepare(host_, bad); }, invalid, "cu_seqlens_q"));
  bad = meta_;
  bad.max_seqlen_k = 1;
  EXPECT_TRUE(raises([&] { backend_->prepare(host_, bad); }, invalid, "max_seqlen"));
}

TEST_F(Arguments, Merge) {
  const HostTensor out = make({5, 4, 12}), lse = make({4, 5}, DType::float32);
  const MergeArgs good{out.view(),   lse.view(),   out.view(),  lse.view(), make({5, 4, 12}).view(),
                       TensorView{}, std::nullopt, std::nullopt};
  EXPECT_NO_THROW(check_merge_args(good));
  const auto with = [&](auto change) {
    MergeArgs args = good;
    change(args);
    return [args] { check_merge_args(args); };
  };
  const HostTensor other_heads = make({5, 3, 12}), wrong_lse = make({5, 4}, DType::float32);
  const HostTensor fp8(DType::float8_e4m3, {5, 4, 12}), half_out = make({5, 4, 12}, DType::float16);
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.suffix_out = other_heads.view(); }), invalid,
                     "merge: suffix_out has 3 heads but 4 are expected"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.suffix_out = half_out.view(); }), invalid,
                     "merge: suffix_out has dtype float16 but prefix_out is bfloat16"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.prefix_lse = wrong_lse.view(); }), invalid,
                     "merge: prefix_lse must be float32[4, 5] (heads, tokens); got float32[5, 4]"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.suffix_lse = TensorView{}; }), invalid,
                     "merge: suffix_lse must be float32[4, 5] (heads, tokens); got an empty view"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.out_lse = wrong_lse.view(); }), invalid,
                     "merge: out_lse must be float32[4, 5]"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.out = fp8.view(); }), invalid, "(a float8_e4m3 out needs out_scale)"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.out_scale = 2.0f; }), invalid,
                     "out_scale is given, so out must be float8_e4m3"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.out = fp8.view(), a.out_scale = -2.0f; }), invalid,
                     "out_scale must be a finite positive"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.out = other_heads.view(); }), invalid, "merge: out has 3 heads"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.out = TensorView{}; }), invalid, "merge: out is missing"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.prefix_out = fp8.view(), a.suffix_out = fp8.view(); }), invalid,
                     "merge: prefix_out must not be float8_e4m3"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.prefill_tokens_with_context = 6; }), invalid,
                     "merge: prefill_tokens_with_context must be in [0, 5]; got 6"));
  EXPECT_TRUE(raises(with([&](MergeArgs& a) { a.prefill_tokens_with_context = -1; }), invalid, "got -1"));
  EXPECT_NO_THROW(
      with([&](MergeArgs& a) { a.out = fp8.view(), a.out_scale = 2.0f, a.prefill_tokens_with_context = 5; })());
}

TEST_F(Arguments, Construction) {
  EXPECT_TRUE(raises([] { make_reference(tiny_params(dims, 0)); }, invalid, "num_heads must be at least 1; got 0"));
  EXPECT_TRUE(raises([] { make_reference(tiny_params({0, 0, 12})); }, invalid, "MLA dims must be positive"));
  EXPECT_TRUE(raises([] { make_reference(tiny_params(dims, 1, DType::float8_e4m3)); }, invalid,
                     "float8_e4m3 q, k and v need out_dtype float16 or bfloat16 for the output; got none"));
}

TEST_F(Arguments, PrefillStepNeedsOneViewPerChunk) {
  EXPECT_TRUE(
      raises([&] { run_prefill_step(*backend_, host_, meta_, q_.view(), k_.view(), v_.view(), {}, {}, 0.2f); }, invalid,
             "run_prefill_step: the metadata has 1 context chunks but 0 chunk_k and 0 chunk_v views were given"));
}

// Caller-provided results: shapes are checked like every operand, an LSE
// needs return_lse, and a step's workspace must be as large as asked.
TEST_F(Arguments, CallerResultViewsAreChecked) {
  backend_->prepare(host_, meta_);
  HostTensor lse = make({4, 5}, DType::float32), short_lse = make({4, 4}, DType::float32);
  HostTensor out = make({5, 4, 12}), chunk_k = make({5, 4, 24}), chunk_v = make({5, 4, 12});
  EXPECT_TRUE(
      raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, false, {}, {}, lse.view()); },
             invalid, "REFERENCE: an lse view was given but return_lse is false"));
  EXPECT_TRUE(raises(
      [&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, {}, {}, short_lse.view()); },
      invalid, "lse"));
  EXPECT_TRUE(raises(
      [&] {
        backend_->run_context_chunk(host_, 0, q_.view(), chunk_k.view(), chunk_v.view(), 0.2f, out.view(),
                                    short_lse.view());
      },
      invalid, "chunk lse"));
  HostTensor f32_out = make({5, 4, 12}, DType::float32);
  EXPECT_TRUE(raises(
      [&] { backend_->run_context_chunk(host_, 0, q_.view(), chunk_k.view(), chunk_v.view(), 0.2f, f32_out.view()); },
      invalid, "chunk out"));
  // Written where asked: the views come back as the result.
  const AttentionResult r =
      backend_->run_context_chunk(host_, 0, q_.view(), chunk_k.view(), chunk_v.view(), 0.2f, out.view(), lse.view());
  EXPECT_EQ(r.out.data, out.view().data);
  EXPECT_EQ(r.lse.data, lse.view().data);
  EXPECT_FALSE(r.out_storage);
  EXPECT_FALSE(r.lse_storage);

  const std::size_t needed = prefill_step_workspace_size(backend_->params(), meta_);
  UsmBuffer workspace = UsmBuffer::device(host_, needed);
  PrefillStepBuffers buffers{out.view(), lse.view(), workspace.get(), needed - 1};
  EXPECT_TRUE(raises(
      [&] {
        run_prefill_step(*backend_, host_, meta_, q_.view(), k_.view(), v_.view(), {chunk_k.view()}, {chunk_v.view()},
                         0.2f, buffers);
      },
      invalid, "run_prefill_step: the step needs " + std::to_string(needed) + " bytes of workspace"));
  buffers.workspace_bytes = needed;
  buffers.out = TensorView{};
  EXPECT_TRUE(raises(
      [&] {
        run_prefill_step(*backend_, host_, meta_, q_.view(), k_.view(), v_.view(), {chunk_k.view()}, {chunk_v.view()},
                         0.2f, buffers);
      },
      invalid, "run_prefill_step: buffers.out is missing"));
}

// An output that shares memory with an input (or another output) would be
// written while it is read: every entry point refuses it, naming both.
TEST_F(Arguments, OutputsOverlappingInputsAreRefused) {
  backend_->prepare(host_, meta_);
  TensorView q_head = q_.view();  // [5, 4, 12] inside q's [5, 4, 24]
  q_head.shape[2] = 12;
  HostTensor lse = make({4, 5}, DType::float32), out = make({5, 4, 12});
  const TensorView lse_in_out = TensorView::contiguous(out.view().data, DType::float32, {4, 5});
  EXPECT_TRUE(raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, q_head); },
                     invalid, "out overlaps q: an output must not share memory with an input or another output"));
  EXPECT_TRUE(raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, v_.view()); },
                     invalid, "out overlaps v"));
  EXPECT_TRUE(raises(
      [&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, out.view(), {}, lse_in_out); },
      invalid, "out overlaps lse"));

  HostTensor chunk_k = make({5, 4, 24}), chunk_v = make({5, 4, 12});
  EXPECT_TRUE(raises(
      [&] { backend_->run_context_chunk(host_, 0, q_.view(), chunk_k.view(), chunk_v.view(), 0.2f, chunk_v.view()); },
      invalid, "chunk out overlaps chunk 0 v"));
  const TensorView lse_in_k = TensorView::contiguous(chunk_k.view().data, DType::float32, {4, 5});
  EXPECT_TRUE(raises(
      [&] {
        backend_->run_context_chunk(host_, 0, q_.view(), chunk_k.view(), chunk_v.view(), 0.2f, out.view(), lse_in_k);
      },
      invalid, "chunk lse overlaps chunk 0 k"));

  HostTensor prefix = make({5, 4, 12}), suffix = make({5, 4, 12}), prefix_lse = make({4, 5}, DType::float32);
  HostTensor suffix_lse = make({4, 5}, DType::float32);
  const MergeArgs merge{prefix.view(), prefix_lse.view(), suffix.view(), suffix_lse.view(),
                        suffix.view(), TensorView{},      std::nullopt,  std::nullopt};
  EXPECT_TRUE(raises([&] { backend_->merge_attn_states(host_, merge); }, invalid, "merge: out overlaps suffix_out"));
  MergeArgs merge_lse = merge;
  merge_lse.out = out.view();
  merge_lse.out_lse = prefix_lse.view();
  EXPECT_TRUE(
      raises([&] { backend_->merge_attn_states(host_, merge_lse); }, invalid, "merge: out_lse overlaps prefix_lse"));

  const std::size_t needed = prefill_step_workspace_size(backend_->params(), meta_);
  UsmBuffer workspace = UsmBuffer::device(host_, needed);
  const auto step = [&](const PrefillStepBuffers& buffers) {
    return [&, buffers] {
      run_prefill_step(*backend_, host_, meta_, q_.view(), k_.view(), v_.view(), {chunk_k.view()}, {chunk_v.view()},
                       0.2f, buffers);
    };
  };
  EXPECT_TRUE(raises(step({chunk_v.view(), lse.view(), workspace.get(), needed}), invalid,
                     "run_prefill_step: out overlaps chunk_v[0]"));
  // A workspace as large as q's own memory: overlaps are checked before its size.
  const std::size_t q_bytes = static_cast<std::size_t>(q_.view().numel()) * dtype_size(q_.view().dtype);
  EXPECT_TRUE(raises(step({out.view(), lse.view(), q_.view().data, q_bytes}), invalid,
                     "run_prefill_step: workspace overlaps q"));
  EXPECT_TRUE(
      raises(step({out.view(), lse_in_out, workspace.get(), needed}), invalid, "run_prefill_step: out overlaps lse"));
  // The same buffers apart are accepted.
  EXPECT_NO_THROW(step({out.view(), lse.view(), workspace.get(), needed})());
}

// An output whose own elements alias (a broadcast head, rows closer than a
// row's width) would be written twice per element: refused, and the
// output's memory is not touched.
TEST_F(Arguments, OutputsOverlappingThemselvesAreRefused) {
  backend_->prepare(host_, meta_);
  HostTensor out = make({5, 4, 12}), lse = make({4, 5}, DType::float32);
  const std::vector<std::byte> before(
      static_cast<const std::byte*>(out.view().data),
      static_cast<const std::byte*>(out.view().data) + 5 * 4 * 12 * dtype_size(out.view().dtype));
  TensorView broadcast_heads = out.view();  // every head onto the first
  broadcast_heads.stride[1] = 0;
  EXPECT_TRUE(
      raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, broadcast_heads); },
             invalid, "out overlaps itself: two of its elements share memory"));
  TensorView short_rows = out.view();  // heads 6 apart with 12 columns each
  short_rows.stride[1] = 6;
  EXPECT_TRUE(raises([&] { backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, short_rows); },
                     invalid, "out overlaps itself"));
  TensorView lse_one_token = lse.view();  // every token onto the first
  lse_one_token.stride[1] = 0;
  EXPECT_TRUE(raises(
      [&] {
        backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, out.view(), {}, lse_one_token);
      },
      invalid, "lse overlaps itself"));
  EXPECT_TRUE(std::equal(before.begin(), before.end(), static_cast<const std::byte*>(out.view().data)));
  // A transposed but disjoint layout is accepted: [5, 4, 12] over [4, 5, 12] memory.
  TensorView transposed = out.view();
  transposed.stride[0] = 12;
  transposed.stride[1] = 5 * 12;
  EXPECT_NO_THROW(backend_->run_new_tokens(host_, q_.view(), k_.view(), v_.view(), 0.2f, true, transposed));
}

// The reference reads memory on the calling thread: a GPU queue is refused.
TEST_F(Arguments, ReferenceRefusesGpuQueues) {
  Queue gpu = fake_gpu_queue();
  EXPECT_TRUE(raises([&] { backend_->prepare(gpu, meta_); }, ErrorCategory::not_supported,
                     "REFERENCE prepare needs a host queue; got a cuda queue"));
  backend_->prepare(host_, meta_);
  EXPECT_TRUE(raises([&] { backend_->run_new_tokens(gpu, q_.view(), k_.view(), v_.view(), 0.2f, true); },
                     ErrorCategory::not_supported, "REFERENCE run_new_tokens needs a host queue; got a cuda queue"));
  EXPECT_TRUE(raises([&] { backend_->merge_attn_states(gpu, MergeArgs{}); }, ErrorCategory::not_supported,
                     "REFERENCE merge_attn_states needs a host queue; got a cuda queue"));
}

// A backend that uses the shared checks but cannot quantise its output, on a
// queue that cannot read host memory.
class CheckingBackend final : public PrefillBackend {
 public:
  using PrefillBackend::PrefillBackend;
  std::string name() const override { return "CHECKING"; }
  void merge_attn_states(Queue& queue, const MergeArgs& args) const override { check_merge_args(queue, args); }

 protected:
  // The interface has checked the arguments and allocated the outputs.
  void attend(Queue&, const AttentionCall&) const override {}
};

TEST_F(Arguments, MemoryTheQueueCannotReadIsRefused) {
  Queue gpu = fake_gpu_queue();
  CheckingBackend backend(tiny_params(dims, 4, DType::bfloat16));
  backend.prepare(gpu, meta_);
  TensorView q_dev = q_.view(), k_dev = k_.view(), v_dev = v_.view();
  q_dev.memory = k_dev.memory = v_dev.memory = MemoryKind::device;
  const AttentionResult r = backend.run_new_tokens(gpu, q_dev, k_dev, v_dev, 0.2f, true, std::nullopt, std::nullopt);
  EXPECT_EQ(r.out.memory, MemoryKind::device);
  EXPECT_TRUE(
      raises([&] { backend.run_new_tokens(gpu, q_.view(), k_dev, v_dev, 0.2f, true, std::nullopt, std::nullopt); },
             invalid, "q is in host memory, which the queue"));
  EXPECT_TRUE(raises([&] { backend.run_context_chunk(gpu, 0, q_dev, k_dev, v_.view(), 0.2f); }, invalid,
                     "chunk v is in host memory"));
  TensorView shared = q_.view();
  shared.memory = MemoryKind::shared;
  EXPECT_NO_THROW(check_accessible(gpu, shared, "q"));
  EXPECT_TRUE(raises([&] { backend.run_new_tokens(gpu, q_dev, k_dev, v_dev, 0.2f, true, std::nullopt, 1.0f); },
                     ErrorCategory::not_supported, "CHECKING cannot write float8_e4m3 output"));
}

}  // namespace
}  // namespace mla::testing
