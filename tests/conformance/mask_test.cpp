// Top-k key masks, sliding windows and attention sinks (docs/contract.md §12):
// the backend under test against REFERENCE with the same mask, and, with
// REFERENCE under test, REFERENCE against the oracle, which reads the
// allowed sets the test drew rather than the bits. Masks empty whole key
// tiles, rows and chunks; bits the contract says are never read (rows past
// a sequence's queries, positions past its keys) are set, so reading them
// shows. A backend that takes no masks must refuse them and write nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "config/scoped_env.hpp"
#include "conformance/conformance_fixture.hpp"
#include "mla/attention_mask.hpp"

namespace mla::testing {
namespace {

using Chooser = std::function<bool(std::size_t sequence, std::int64_t row, std::int64_t position)>;

// A drawn mask: the allowed sets, and their bits in vLLM's layout (rows
// padded past the longest sequence, words past what the keys need) on the
// queue under test and on the host, where REFERENCE reads them.
struct DrawnMask {
  std::vector<std::vector<std::vector<char>>> allowed;  // [sequence][row][position]
  UsmBuffer on_queue, on_host;
  TopkMask queue_view, host_view;

  bool allows(std::size_t b, std::int64_t i, std::int64_t p) const {
    return allowed[b][static_cast<std::size_t>(i)][static_cast<std::size_t>(p)] != 0;
  }
};

// Each sequence's sink cycles through no sink, small and large ones.
std::vector<float> head_sinks(int heads) {
  const float cycle[] = {0.5f, -std::numeric_limits<float>::infinity(), 3.0f, -2.0f};
  std::vector<float> sinks;
  for (int h = 0; h < heads; ++h) sinks.push_back(cycle[h % 4]);
  return sinks;
}

class MaskFixture : public Conformance {
 protected:
  // Draws `choose` over every (sequence, row, position) of `whole` keys.
  DrawnMask draw(const std::vector<int>& q_lens, const std::vector<int>& whole, const Chooser& choose) {
    DrawnMask mask;
    const std::int64_t rows = *std::max_element(q_lens.begin(), q_lens.end()) + 2;
    const std::int64_t words = topk_mask_words(*std::max_element(whole.begin(), whole.end())) + 4;
    const std::int64_t batch = static_cast<std::int64_t>(q_lens.size());
    std::vector<std::uint32_t> bits(static_cast<std::size_t>(batch * rows * words), 0xffffffffu);
    for (std::size_t b = 0; b < q_lens.size(); ++b) {
      mask.allowed.emplace_back();
      for (std::int64_t i = 0; i < q_lens[b]; ++i) {
        std::vector<char>& row = mask.allowed.back().emplace_back(static_cast<std::size_t>(whole[b]), 0);
        std::uint32_t* words_of_row = bits.data() + (static_cast<std::int64_t>(b) * rows + i) * words;
        for (std::int64_t p = 0; p < whole[b]; ++p) {
          row[static_cast<std::size_t>(p)] = choose(b, i, p) ? 1 : 0;
          if (!row[static_cast<std::size_t>(p)]) words_of_row[p / 32] &= ~(1u << (p % 32));
        }
      }
    }
    const std::size_t bytes = bits.size() * sizeof(std::uint32_t);
    mask.on_queue = UsmBuffer::device(queue_, bytes);
    queue_.memcpy(mask.on_queue.get(), bits.data(), bytes);
    queue_.wait();
    mask.on_host = UsmBuffer::host(host_, bytes);
    std::memcpy(mask.on_host.get(), bits.data(), bytes);
    mask.queue_view =
        TopkMask::contiguous(mask.on_queue.as<const std::uint32_t>(), batch, rows, words,
                             queue_.backend() == DeviceBackend::host ? MemoryKind::host : MemoryKind::device);
    mask.host_view = TopkMask::contiguous(mask.on_host.as<const std::uint32_t>(), batch, rows, words);
    return mask;
  }

  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }

  // float32 [H] sinks on the queue and on the host.
  struct Sinks {
    HostTensor host;
    DeviceTensor device;
  };
  Sinks sinks_of(const std::vector<float>& values) {
    Sinks sinks{HostTensor(DType::float32, {static_cast<std::int64_t>(values.size())}), {}};
    for (std::size_t h = 0; h < values.size(); ++h) sinks.host.set(values[h], static_cast<std::int64_t>(h));
    sinks.device = upload(queue_, sinks.host);
    return sinks;
  }

  OracleMask oracle_mask(const DrawnMask* drawn, std::int64_t window, const std::vector<float>& sinks) {
    OracleMask mask;
    if (drawn != nullptr)
      mask.allowed = [drawn](std::size_t b, std::int64_t i, std::int64_t p) { return drawn->allows(b, i, p); };
    mask.window = window;
    mask.sinks.assign(sinks.begin(), sinks.end());
    return mask;
  }

  // New tokens of `q_lens` against `k_lens` keys (causal, bottom-right) with
  // the top-k mask `choose` (none when empty), `window` and `sinks`, on the
  // backend under test and REFERENCE.
  ::testing::AssertionResult new_tokens_match(const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                                              const Chooser& choose, std::int64_t window,
                                              const std::vector<float>& sinks) {
    const PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, k_lens);
    const Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
    DrawnMask drawn;
    Sinks sink_tensors;
    AttentionMask mask, host_mask;
    mask.window = host_mask.window = window;
    if (choose) {
      drawn = draw(q_lens, k_lens, choose);
      mask.topk = drawn.queue_view;
      host_mask.topk = drawn.host_view;
    }
    if (!sinks.empty()) {
      sink_tensors = sinks_of(sinks);
      mask.sinks = sink_tensors.device.view;
      host_mask.sinks = sink_tensors.host.view();
    }

    backend_->prepare(queue_, meta);
    const AttentionResult result =
        backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, std::nullopt,
                                 std::nullopt, std::nullopt, std::nullopt, mask);
    reference_->prepare(host_, meta);
    const AttentionResult ref =
        reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true, std::nullopt,
                                   std::nullopt, std::nullopt, std::nullopt, host_mask);
    if (reference_under_test()) {
      auto exact = agrees_with_oracle(ref.out, ref.lse,
                                      oracle_attention(ops.q, ops.k, ops.v, q_lens, k_lens, true, scale_, std::nullopt,
                                                       {}, oracle_mask(choose ? &drawn : nullptr, window, sinks)));
      if (!exact) return exact << " (REFERENCE against the oracle)";
    }
    return matches(result, ref);
  }
};

// Backends that take masks (takes_attention_masks); the others skip here
// and are held to their refusal by MaskRefusal.
class MaskConformance : public MaskFixture {
 protected:
  void SetUp() override {
    MaskFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!backend_->takes_attention_masks())
      GTEST_SKIP() << backend_->name() << " takes no masks (§12); MaskRefusal holds it to refusing them";
  }
};

const std::vector<int> mask_q_lens{1, 0, 17, 70, 130};
const std::vector<int> mask_k_lens{1, 0, 17, 90, 130};  // sequence 3: more keys than queries

TEST_P(MaskConformance, TopkMaskEmptiesTilesAndRows) {
  // Sequence 4 hides keys [0, 64) and [128, 130) from every row, whole
  // tiles of the KOKKOS kernel; row 5 of sequence 2 sees no key at all.
  const Chooser choose = [this](std::size_t b, std::int64_t i, std::int64_t p) {
    if (b == 4) return p >= 64 && p < 128 && coin(0.5);
    if (b == 2 && i == 5) return false;
    return coin(0.3);
  };
  EXPECT_TRUE(new_tokens_match(mask_q_lens, mask_k_lens, choose, 0, {}));
}

// Each query sees one key, at a multiple of 128: the first key of a key
// tile of any size up to 128, and the only one of the tile that any query
// of the batch sees. Skipping such a tile loses the row's whole output.
TEST_P(MaskConformance, LoneKeysAtTileStarts) {
  const Chooser lone = [](std::size_t, std::int64_t i, std::int64_t p) { return p == 128 * i; };
  EXPECT_TRUE(new_tokens_match({3}, {300}, lone, 0, {}));
}

TEST_P(MaskConformance, SlidingWindows) {
  for (std::int64_t window : {1, 7, 64, 1 << 30}) {
    EXPECT_TRUE(new_tokens_match(mask_q_lens, mask_k_lens, {}, window, {})) << "window " << window;
  }
  const Chooser half = [this](std::size_t, std::int64_t, std::int64_t) { return coin(0.5); };
  EXPECT_TRUE(new_tokens_match(mask_q_lens, mask_k_lens, half, 20, {})) << "window 20 with a top-k mask";
}

TEST_P(MaskConformance, SinksJoinTheDenominatorOnly) {
  EXPECT_TRUE(new_tokens_match(mask_q_lens, mask_k_lens, {}, 0, head_sinks(heads())));
  const Chooser sparse = [this](std::size_t, std::int64_t, std::int64_t) { return coin(0.2); };
  EXPECT_TRUE(new_tokens_match(mask_q_lens, mask_k_lens, sparse, 33, head_sinks(heads())));
}

// One call whose plan cuts its keys into split-KV ranges (the GPU backends
// with MLA_KV_SPLITS=3; the others ignore it): every range skips what its
// mask hides, the ranges' partials hold no sink and their merge applies it
// once, so the call equals REFERENCE's.
TEST_P(MaskConformance, SplitKeyRangesApplyTheSinkOnce) {
  const test::ScopedEnv splits("MLA_KV_SPLITS", "3");
  const PrefillMetadata meta = PrefillMetadata::from_lengths(mask_q_lens, mask_k_lens);
  const Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  const DrawnMask drawn = draw(mask_q_lens, mask_k_lens, [this](std::size_t b, std::int64_t, std::int64_t p) {
    return b == 4 ? p >= 64 && coin(0.4) : coin(0.4);
  });
  const std::vector<float> sink_values = head_sinks(heads());
  const Sinks sinks = sinks_of(sink_values);
  PlanOptions options;
  options.split_keys = true;
  const AttentionPlan plan = backend_->plan(queue_, meta, options);
  UsmBuffer workspace = UsmBuffer::device(queue_, std::max<std::size_t>(plan.workspace_bytes, 64));
  const Workspace memory{workspace.get(), workspace.bytes()};
  backend_->upload_plan(queue_, plan, memory);
  for (const std::int64_t window : {std::int64_t{0}, std::int64_t{50}}) {
    const AttentionMask mask{drawn.queue_view, window, sinks.device.view};
    const AttentionResult result =
        backend_->run_new_tokens(queue_, plan, memory, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true,
                                 std::nullopt, std::nullopt, std::nullopt, std::nullopt, mask);
    reference_->prepare(host_, meta);
    const AttentionResult ref = reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_,
                                                           true, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                                           AttentionMask{drawn.host_view, window, sinks.host.view()});
    EXPECT_TRUE(matches(result, ref)) << "window " << window;
  }
}

// An index list that names every position (k past the visible keys, -1
// slots among them) is no mask at all: the result equals the unmasked one.
TEST_P(MaskConformance, IndexListLongerThanTheKeys) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(mask_q_lens, mask_k_lens);
  const std::int64_t k = 140;
  std::vector<std::int32_t> indices(static_cast<std::size_t>(meta.num_q_tokens() * k), -1);
  for (std::size_t b = 0; b < mask_q_lens.size(); ++b) {
    for (std::int64_t i = 0; i < mask_q_lens[b]; ++i) {
      std::int32_t* row = indices.data() + (meta.cu_seqlens_q[b] + i) * k;
      for (std::int32_t p = 0; p < mask_k_lens[b]; ++p) row[p] = p;
      std::shuffle(row, row + k, rng_);
    }
  }
  const HostTopkMask built = HostTopkMask::from_indices(meta, indices.data(), k, k);
  ASSERT_EQ(queue_.backend(), DeviceBackend::host) << "the host-built mask is read in place";
  AttentionMask mask;
  mask.topk = built.view();
  const Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  backend_->prepare(queue_, meta);
  const AttentionResult masked = backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true,
                                                          std::nullopt, std::nullopt, std::nullopt, std::nullopt, mask);
  reference_->prepare(host_, meta);
  const AttentionResult plain =
      reference_->run_new_tokens(host_, ops.q.view(), ops.k.view(), ops.v.view(), scale_, true);
  EXPECT_TRUE(matches(masked, plain));
}

// run_prefill_step with the mask, a window and sinks over three chunks
// equals one masked pass over context and new keys with the sinks once.
// Sequence 5's bits leave both of its context chunks empty; sequence 1's
// new tokens see only context. Last with MLA_KV_SPLITS=3: the GPU kernels
// then cut every call's key tiles into 3 ranges, each skipping what its
// mask hides and leaving the sink to the merge of the ranges (the other
// backends ignore the variable).
TEST_P(MaskConformance, ChunkedStepEqualsOneMaskedPass) {
  const std::vector<int> q_lens{1, 0, 17, 6, 33, 70};
  const std::vector<std::vector<int>> chunk_lens{{5, 0, 40, 0, 17, 64}, {0, 3, 11, 1, 0, 64}, {0, 0, 0, 0, 0, 0}};
  const ChunkedOperands c = chunked_operands(q_lens, chunk_lens);
  const Chooser choose = [&](std::size_t b, std::int64_t, std::int64_t p) {
    if (b == 5) return p >= 128 && coin(0.5);
    if (b == 4) return p < 17 && coin(0.7);  // only context
    return coin(0.4);
  };
  const DrawnMask drawn = draw(q_lens, c.full_lens, choose);
  const std::vector<float> sink_values = head_sinks(heads());
  const Sinks sinks = sinks_of(sink_values);
  for (const auto& [window, splits] : {std::pair<std::int64_t, const char*>{0, nullptr}, {25, nullptr}, {25, "3"}}) {
    SCOPED_TRACE(splits == nullptr ? "one key range" : "MLA_KV_SPLITS=3");
    const test::ScopedEnv split_env("MLA_KV_SPLITS",
                                    splits == nullptr ? std::nullopt : std::optional<std::string>(splits));
    AttentionMask mask;
    mask.topk = drawn.queue_view;
    mask.window = window;
    mask.sinks = sinks.device.view;
    const AttentionResult result = run_prefill_step(*backend_, queue_, c.meta, c.ops.dq.view, c.ops.dk.view,
                                                    c.ops.dv.view, c.chunk_k, c.chunk_v, scale_, std::nullopt, mask);
    AttentionMask host_mask{drawn.host_view, window, sinks.host.view()};
    reference_->prepare(host_, PrefillMetadata::from_lengths(q_lens, c.full_lens));
    const AttentionResult ref =
        reference_->run_new_tokens(host_, c.ops.q.view(), c.full_k.view(), c.full_v.view(), scale_, true, std::nullopt,
                                   std::nullopt, std::nullopt, std::nullopt, host_mask);
    if (reference_under_test()) {
      EXPECT_TRUE(agrees_with_oracle(ref.out, ref.lse,
                                     oracle_attention(c.ops.q, c.full_k, c.full_v, q_lens, c.full_lens, true, scale_,
                                                      std::nullopt, {}, oracle_mask(&drawn, window, sink_values))))
          << "window " << window;
    }
    EXPECT_TRUE(matches(result, ref)) << "window " << window;
  }
}

// Every bad mask is Error(invalid_argument) and leaves the caller's out
// and lse as they were.
TEST_P(MaskConformance, BadMasksAreRefusedAndNothingIsWritten) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(mask_q_lens, mask_k_lens);
  const Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  const DrawnMask drawn = draw(mask_q_lens, mask_k_lens, [](std::size_t, std::int64_t, std::int64_t) { return true; });
  const std::int64_t nq = meta.num_q_tokens(), h = heads(), dv = v_dim();
  const HostTensor poisoned_out(params_.output_dtype(), {nq, h, dv});
  const HostTensor poisoned_lse(DType::float32, {h, nq});
  const DeviceTensor out = upload(queue_, poisoned_out), lse = upload(queue_, poisoned_lse);
  backend_->prepare(queue_, meta);
  const auto refused = [&](const AttentionMask& mask, const std::string& expected) {
    std::string message = "no error";
    try {
      backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, out.view, std::nullopt,
                               lse.view, std::nullopt, mask);
    } catch (const Error& error) {
      message = error.what();
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument) << message;
    }
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
    const HostTensor out_after = fetch(out.view), lse_after = fetch(lse.view);
    EXPECT_EQ(std::memcmp(out_after.storage(), poisoned_out.storage(), poisoned_out.storage_bytes()), 0)
        << expected << ": out was written";
    EXPECT_EQ(std::memcmp(lse_after.storage(), poisoned_lse.storage(), poisoned_lse.storage_bytes()), 0)
        << expected << ": lse was written";
  };
  const TopkMask good = drawn.queue_view;
  auto with = [&](auto change) {
    AttentionMask mask;
    mask.topk = good;
    change(mask);
    return mask;
  };
  refused(with([](AttentionMask& m) { m.topk.batch_size += 1; }), "has 6 sequences but the plan has 5");
  refused(with([](AttentionMask& m) { m.topk.rows = 100; }), "has 100 rows per sequence but a sequence has 130");
  refused(with([](AttentionMask& m) { m.topk.words_per_row = 4; }), "cover 128 key positions but a sequence has 130");
  refused(with([](AttentionMask& m) { m.topk.words += 1; }), "must be 16-byte aligned");
  refused(with([](AttentionMask& m) { m.topk.row_stride += 2; }), "multiples of 4 words");
  refused(with([](AttentionMask& m) { m.topk.batch_stride = m.topk.row_stride; }), "sequences overlap");
  refused(with([](AttentionMask& m) { m.window = -1; }), "window must be 0 (none) or a key count");
  refused(with([](AttentionMask& m) { m.window = std::int64_t{1} << 31; }), "window must be 0 (none) or a key count");
  const Sinks wrong_size = sinks_of(std::vector<float>(static_cast<std::size_t>(h) + 1, 0.0f));
  refused(with([&](AttentionMask& m) { m.sinks = wrong_size.device.view; }), "sinks must be float32[");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> values(static_cast<std::size_t>(h), 1.0f);
    values.back() = bad;
    const Sinks sinks = sinks_of(values);
    refused(with([&](AttentionMask& m) { m.sinks = sinks.device.view; }), "sinks must be finite or -inf");
  }
}

// A NaN sink in a chunked step is refused before its first call writes.
TEST_P(MaskConformance, StepRefusesABadSinkBeforeWriting) {
  const std::vector<int> q_lens{3, 5};
  PrefillMetadata meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  meta.add_chunk({4, 2});
  meta.add_chunk({1, 0});
  const Operands ops = random_operands(meta.num_q_tokens(), meta.num_k_tokens());
  const Operands c0 = random_operands(0, 6), c1 = random_operands(0, 1);
  std::vector<float> values(static_cast<std::size_t>(heads()), 0.0f);
  values.front() = std::numeric_limits<float>::quiet_NaN();
  const Sinks sinks = sinks_of(values);
  AttentionMask mask;
  mask.sinks = sinks.device.view;
  const HostTensor poisoned(params_.output_dtype(), {meta.num_q_tokens(), heads(), v_dim()});
  const DeviceTensor out = upload(queue_, poisoned);
  const std::size_t bytes = prefill_step_workspace_size(params_, meta);
  UsmBuffer workspace = UsmBuffer::device(queue_, bytes);
  const PrefillStepBuffers buffers{out.view, TensorView{}, workspace.get(), bytes};
  EXPECT_THROW(
      run_prefill_step(*backend_, queue_, meta, ops.dq.view, ops.dk.view, ops.dv.view, {c0.dk.view, c1.dk.view},
                       {c0.dv.view, c1.dv.view}, scale_, buffers, std::nullopt, mask),
      Error);
  const HostTensor after = fetch(out.view);
  EXPECT_EQ(std::memcmp(after.storage(), poisoned.storage(), poisoned.storage_bytes()), 0) << "out was written";
}

// Every backend: one that takes no masks refuses a mask, a window and
// sinks with Error(not_supported), in both calls and the merge, and writes
// nothing.
class MaskRefusal : public MaskFixture {};

TEST_P(MaskRefusal, BackendsWithoutMasksRefuseThem) {
  if (backend_->takes_attention_masks())
    GTEST_SKIP() << backend_->name() << " takes masks; MaskConformance checks them";
  PrefillMetadata meta = PrefillMetadata::from_lengths({3, 4}, {3, 4});
  meta.add_chunk({2, 5});
  const Operands ops = random_operands(7, 7);
  const Operands chunk = random_operands(0, 7);
  const DrawnMask drawn = draw({3, 4}, {5, 9}, [](std::size_t, std::int64_t, std::int64_t) { return true; });
  const Sinks sinks = sinks_of(std::vector<float>(static_cast<std::size_t>(heads()), 0.0f));
  const HostTensor poisoned(params_.output_dtype(), {7, heads(), v_dim()});
  const DeviceTensor out = upload(queue_, poisoned);
  backend_->prepare(queue_, meta);
  const auto not_supported = [&](auto call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::not_supported) << what << ": " << error.what();
      EXPECT_NE(std::string(error.what()).find("§12"), std::string::npos) << error.what();
    }
    const HostTensor after = fetch(out.view);
    EXPECT_EQ(std::memcmp(after.storage(), poisoned.storage(), poisoned.storage_bytes()), 0) << what << " wrote out";
  };
  AttentionMask topk;
  topk.topk = drawn.queue_view;
  not_supported(
      [&] {
        backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, false, out.view, std::nullopt,
                                 std::nullopt, std::nullopt, topk);
      },
      "a top-k mask");
  AttentionMask window;
  window.window = 4;
  not_supported(
      [&] {
        backend_->run_context_chunk(queue_, 0, ops.dq.view, chunk.dk.view, chunk.dv.view, scale_, out.view,
                                    std::nullopt, std::nullopt, window);
      },
      "a window");
  const HostTensor lse_in(DType::float32, {heads(), 7});
  const DeviceTensor lse = upload(queue_, lse_in);
  MergeArgs merge;
  merge.prefix_out = merge.suffix_out = ops.dv.view;
  merge.prefix_lse = merge.suffix_lse = lse.view;
  merge.out = out.view;
  merge.sinks = sinks.device.view;
  not_supported([&] { backend_->merge_attn_states(queue_, merge); }, "merge sinks");
}

std::vector<ConformanceShape> mask_shapes() {
  std::vector<ConformanceShape> shapes;
  for (DType dtype : {DType::float32, DType::bfloat16})
    for (int heads : {1, 4}) shapes.push_back({dtype, deepseek_dims, heads});
  shapes.push_back({DType::float16, {192, 64, 256}, 2});
  return shapes;
}

INSTANTIATE_TEST_SUITE_P(Masks, MaskConformance, ::testing::ValuesIn(mask_shapes()), shape_name);
INSTANTIATE_TEST_SUITE_P(Masks, MaskRefusal, ::testing::ValuesIn(mask_shapes()), shape_name);

}  // namespace
}  // namespace mla::testing
