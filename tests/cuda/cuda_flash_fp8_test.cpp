// CUDA_FLASH's float8_e4m3-input kernels (sm_89 and sm_120+) against REFERENCE
// on the same bytes and descales: lengths around the tile sizes, per-head
// descales in device memory, a context chunk with empty sequences, split-KV
// partials and fp8 output, each aimed at a piece of the e4m3 path (the P and
// V key permutation, the interleaved output columns, the descales, P's 2^8
// headroom). The shared conformance suite (Fp8Inputs) covers the contract.
//
// Compiled like cuda_flash_test.cpp: on a CUDA device (skipped where the
// kernel does not run: below 8.9 and on 9.x-11.x) and under the GPU emulator
// (MLA_TEST_EMULATED_CUDA), which stands for an 8.9 part; and for
// HOPPER_FLASH's e4m3 kernels (wgmma k32, V through its transposed copy) on a
// 9.0 device (MLA_TEST_HOPPER) and under the emulator (MLA_TEST_EMULATED_HOPPER).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "builtin_entries.hpp"
#include "config/scoped_env.hpp"
#include "cuda/capability.hpp"
#include "cuda/hopper_config.hpp"
#include "gpu_test_support.hpp"
#include "mla/detail/numeric.hpp"
#if defined(MLA_TEST_EMULATED_CUDA) || defined(MLA_TEST_EMULATED_HOPPER)
#define MLA_TEST_EMULATED_FP8 1
#include "simt/emulated_backends.hpp"
#include "simt/emulator.hpp"
#include "simt/hopper_flash_emulated.hpp"
#endif

namespace mla {
namespace {

using testing::close_to_reference;
using testing::download;
using testing::make_tensor;
using testing::on_host;
using testing::TestTensor;

// GPU kernels round P to e4m3 for P V (docs/contract.md §6).
constexpr double out_tolerance = 5e-2;

struct Fp8Case {
  DType out;
  MlaDims dims;
};

// "e4m3_to_bfloat16_192_128": ci/emulator-defects filters on the tail.
std::string case_name(const ::testing::TestParamInfo<Fp8Case>& info) {
  return "e4m3_to_" + std::string(dtype_name(info.param.out)) + "_" + std::to_string(info.param.dims.qk_head_dim()) +
         "_" + std::to_string(info.param.dims.v_head_dim);
}

// A float32 [n] tensor on the device and its host copy.
struct DescaleTensor {
  std::vector<float> host;
  UsmBuffer device;

  DescaleTensor(Queue& queue, std::vector<float> values) : host(std::move(values)) {
    device = UsmBuffer::device(queue, host.size() * sizeof(float));
    queue.memcpy(device.get(), host.data(), host.size() * sizeof(float));
    queue.wait();
  }
  Descale on_device() const {
    return Descale::of(TensorView::contiguous(device.get(), DType::float32, {static_cast<std::int64_t>(host.size())},
                                              MemoryKind::device));
  }
  Descale on_host() {
    return Descale::of(TensorView::contiguous(host.data(), DType::float32, {static_cast<std::int64_t>(host.size())},
                                              MemoryKind::host));
  }
};

class CudaFlashFp8Test : public ::testing::TestWithParam<Fp8Case> {
 protected:
  void SetUp() override {
#if defined(MLA_TEST_EMULATED_FP8)
#if defined(MLA_TEST_EMULATED_HOPPER)
    const BackendEntry entry = simt::emulated_hopper_flash_entry();
#else
    const BackendEntry entry = simt::emulated_cuda_flash_entry();
#endif
    simt::set_schedule(simt::Schedule::reverse);
    simt::reset_statistics();
#else
    MLA_REQUIRE_CUDA_DEVICE();
    queue_ = Queue(DeviceBackend::cuda, 0);
#if defined(MLA_TEST_HOPPER)
    if (!hopper_flash::supports_device(queue_.capability())) {
      GTEST_SKIP() << hopper_flash::device_gap(queue_.capability());
    }
    const BackendEntry entry = detail::hopper_flash_backend_entry();
#else
    if (!cuda_flash::supports_e4m3_inputs(queue_.capability())) {
      GTEST_SKIP() << cuda_flash::e4m3_device_gap(queue_.capability());
    }
    const BackendEntry entry = detail::cuda_flash_backend_entry();
#endif
#endif
    params_.num_heads = 3;
    params_.dims = GetParam().dims;
    params_.dtype = DType::float8_e4m3;
    params_.out_dtype = GetParam().out;
    scale_ = 1.0f / std::sqrt(static_cast<float>(params_.dims.qk_head_dim()));
    backend_ = entry.factory(params_);
    reference_ = detail::reference_backend_entry().factory(params_);
  }

#if defined(MLA_TEST_EMULATED_FP8)
  void TearDown() override {
    simt::set_schedule(simt::Schedule::forward);
    if (!IsSkipped()) std::printf("[ emulator ] %s\n", simt::describe(simt::statistics()).c_str());
  }
#endif

  // e4m3 values over most of the range (rows padded with NaN bytes).
  TestTensor tensor(std::int64_t tokens, std::int64_t dim, std::int64_t pad = 0) {
    return make_tensor(queue_, DType::float8_e4m3, tokens, params_.num_heads, dim, pad, rng_, -440.0f, 440.0f);
  }
  // Per-head descales around `typical`, different for every head.
  DescaleTensor per_head(float typical) {
    std::vector<float> values;
    for (int h = 0; h < params_.num_heads; ++h) values.push_back(typical * (0.6f + 0.3f * static_cast<float>(h)));
    return DescaleTensor(queue_, values);
  }

  ::testing::AssertionResult matches(const AttentionResult& result, const AttentionResult& expected) {
    auto out_bytes = download(queue_, result.out);
    auto lse_bytes = download(queue_, result.lse);
    const double lse_tolerance = params_.out_dtype == DType::bfloat16 ? 1e-2 : 1e-3;
    return close_to_reference(on_host(result.out, out_bytes), on_host(result.lse, lse_bytes), expected.out,
                              expected.lse, out_tolerance, lse_tolerance);
  }

  // New tokens, causal, with q's and k's descales per head in device memory
  // and v's a host value; q and v with padded rows.
  void check_new_tokens(const PrefillMetadata& metadata) {
    TestTensor q = tensor(metadata.num_q_tokens(), params_.dims.qk_head_dim(), 16);
    TestTensor k = tensor(metadata.num_k_tokens(), params_.dims.qk_head_dim());
    TestTensor v = tensor(metadata.num_k_tokens(), params_.dims.v_head_dim, 32);
    DescaleTensor qd = per_head(2.0f / 440.0f), kd = per_head(1.5f / 440.0f);
    const float vd = 1.0f / 440.0f;
    backend_->prepare(queue_, metadata);
    const AttentionResult result =
        backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale_, true, std::nullopt,
                                 std::nullopt, std::nullopt, InputDescales{qd.on_device(), kd.on_device(), vd});
    Queue host = Queue::host();
    reference_->prepare(host, metadata);
    const AttentionResult expected =
        reference_->run_new_tokens(host, q.host_view, k.host_view, v.host_view, scale_, true, std::nullopt,
                                   std::nullopt, std::nullopt, InputDescales{qd.on_host(), kd.on_host(), vd});
    EXPECT_TRUE(matches(result, expected));
  }

  Queue queue_ = Queue::host();
  BackendParams params_;
  float scale_ = 1.0f;
  std::unique_ptr<PrefillBackend> backend_;
  std::unique_ptr<PrefillBackend> reference_;
  std::mt19937 rng_{20261129};
};

TEST_P(CudaFlashFp8Test, LengthsAroundEveryTileSize) {
  // Around 16 (a warp's rows), 32 (an e4m3 key step), 64 (key tiles) and 128 (query tiles).
  check_new_tokens(PrefillMetadata::from_lengths({1, 31, 33, 64, 0, 65, 130}, {1, 31, 33, 64, 0, 65, 130}, true));
}

TEST_P(CudaFlashFp8Test, MoreKeysThanQueries) {
  check_new_tokens(PrefillMetadata::from_lengths({5, 40, 3}, {77, 40, 150}, true));
}

// A context chunk (non-causal) with empty sequences and every descale form:
// a 0-d q descale, a [1] k descale and a per-head v descale.
TEST_P(CudaFlashFp8Test, ContextChunkWithEmptySequencesAndEveryDescaleForm) {
  PrefillMetadata metadata = PrefillMetadata::from_lengths({65, 9, 20}, {65, 9, 20}, true);
  metadata.add_chunk({0, 100, 37});
  TestTensor q = tensor(metadata.num_q_tokens(), params_.dims.qk_head_dim());
  TestTensor k = tensor(137, params_.dims.qk_head_dim());
  TestTensor v = tensor(137, params_.dims.v_head_dim);
  DescaleTensor qd(queue_, {1.8f / 440.0f}), kd(queue_, {1.2f / 440.0f});
  DescaleTensor vd = per_head(1.0f / 440.0f);
  Descale q_zero_d = qd.on_device();
  q_zero_d.values.rank = 0;
  Descale q_zero_d_host = qd.on_host();
  q_zero_d_host.values.rank = 0;
  backend_->prepare(queue_, metadata);
  const AttentionResult result =
      backend_->run_context_chunk(queue_, 0, q.device_view, k.device_view, v.device_view, scale_, std::nullopt,
                                  std::nullopt, InputDescales{q_zero_d, kd.on_device(), vd.on_device()});
  Queue host = Queue::host();
  reference_->prepare(host, metadata);
  const AttentionResult expected =
      reference_->run_context_chunk(host, 0, q.host_view, k.host_view, v.host_view, scale_, std::nullopt, std::nullopt,
                                    InputDescales{q_zero_d_host, kd.on_host(), vd.on_host()});
  EXPECT_TRUE(matches(result, expected));
}

// Split-KV partials (float32, the output columns as the e4m3 mma leaves
// them) and their merge: a step whose context chunk has few queries against
// many keys, 4 splits forced, with one set of per-head descales for the step.
TEST_P(CudaFlashFp8Test, SplitStepMatchesReference) {
#if defined(MLA_TEST_EMULATED_FP8)
  if (GetParam().dims.qk_head_dim() != 192 || GetParam().out != DType::bfloat16) {
    GTEST_SKIP() << "emulated: split-KV runs on bfloat16 192/128 only";
  }
#endif
  const test::ScopedEnv splits("MLA_KV_SPLITS", "4");
  PrefillMetadata metadata = PrefillMetadata::from_lengths({3, 17}, {3, 17}, true);
  metadata.add_chunk({300, 260});
  const std::int64_t nq = metadata.num_q_tokens(), dv = params_.dims.v_head_dim;
  TestTensor q = tensor(nq, params_.dims.qk_head_dim());
  TestTensor k = tensor(nq, params_.dims.qk_head_dim());
  TestTensor v = tensor(nq, dv);
  TestTensor chunk_k = tensor(560, params_.dims.qk_head_dim());
  TestTensor chunk_v = tensor(560, dv, 16);
  DescaleTensor qd = per_head(2.0f / 440.0f), kd = per_head(1.5f / 440.0f), vd = per_head(1.0f / 440.0f);
  UsmBuffer out_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads * dv) * 2);
  UsmBuffer lse_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads) * 4);
  AttentionResult result;
  result.out =
      TensorView::contiguous(out_storage.get(), GetParam().out, {nq, params_.num_heads, dv}, MemoryKind::device);
  result.lse = TensorView::contiguous(lse_storage.get(), DType::float32, {params_.num_heads, nq}, MemoryKind::device);
  UsmBuffer workspace = UsmBuffer::device(queue_, prefill_step_workspace_size(params_, metadata));
  run_prefill_step(*backend_, queue_, metadata, q.device_view, k.device_view, v.device_view, {chunk_k.device_view},
                   {chunk_v.device_view}, scale_, {result.out, result.lse, workspace.get(), workspace.bytes()},
                   InputDescales{qd.on_device(), kd.on_device(), vd.on_device()});
  Queue host = Queue::host();
  const AttentionResult expected =
      run_prefill_step(*reference_, host, metadata, q.host_view, k.host_view, v.host_view, {chunk_k.host_view},
                       {chunk_v.host_view}, scale_, InputDescales{qd.on_host(), kd.on_host(), vd.on_host()});
  EXPECT_TRUE(matches(result, expected));
#if defined(MLA_TEST_EMULATED_HOPPER)
  // Twice the transpose of V and the kernel, the chunk's split merge, the step's LSE merge.
  EXPECT_EQ(simt::statistics().launches, 6u);
#elif defined(MLA_TEST_EMULATED_CUDA)
  // The chunk's split kernel and its merge, the new tokens, the step's LSE merge.
  EXPECT_EQ(simt::statistics().launches, 4u);
#endif
}

// P's 2^8 headroom: one key scores 11 (log2) above 1499 others, whose
// weights 2^-11 would round to 0 as e4m3 (smallest subnormal 2^-9) but are
// 2^-3 with the headroom, exactly. Their mass is about 0.73 of the row's;
// with values +1 for the one key and -1 for the others the output is
// (1 - m) / (1 + m) = 0.155 per dim, and 0.58 if they were flushed.
TEST_P(CudaFlashFp8Test, SmallWeightsSurviveTheRoundingOfP) {
  const std::int64_t nk = 1500, dqk = params_.dims.qk_head_dim(), dv = params_.dims.v_head_dim;
  const auto filled = [&](std::int64_t tokens, std::int64_t dim, auto value_of) {
    TestTensor t;
    t.host.resize(static_cast<std::size_t>(tokens * params_.num_heads * dim));
    for (std::int64_t i = 0; i < tokens * params_.num_heads * dim; ++i) {
      store_from_float(t.host.data(), DType::float8_e4m3, i, value_of(i / (params_.num_heads * dim)));
    }
    t.host_view =
        TensorView::contiguous(t.host.data(), DType::float8_e4m3, {tokens, params_.num_heads, dim}, MemoryKind::host);
    testing::to_device(queue_, t);
    return t;
  };
  const float k0 = 0.5625f;  // exact in e4m3
  TestTensor q = filled(1, dqk, [](std::int64_t) { return 1.0f; });
  TestTensor k = filled(nk, dqk, [&](std::int64_t token) { return token == 0 ? k0 : 0.0f; });
  TestTensor v = filled(nk, dv, [](std::int64_t token) { return token == 0 ? 1.0f : -1.0f; });
  // Scores in the log2 domain: key 0 at 11, the others at 0.
  const float scale = 11.0f / (1.4426950408889634f * static_cast<float>(dqk) * k0);
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({1}, {static_cast<int>(nk)}, true);
  backend_->prepare(queue_, metadata);
  const AttentionResult result = backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale,
                                                          true, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  Queue host = Queue::host();
  reference_->prepare(host, metadata);
  const AttentionResult expected = reference_->run_new_tokens(host, q.host_view, k.host_view, v.host_view, scale, true);
  const double want = load_as_float(expected.out.data, expected.out.dtype, 0);
  ASSERT_NEAR(want, (2048.0 - 1499.0) / (2048.0 + 1499.0), 2e-3);
  EXPECT_TRUE(matches(result, expected));
}

// fp8 output from fp8 inputs, into a buffer poisoned with NaN bytes.
TEST_P(CudaFlashFp8Test, Fp8OutputFromFp8Inputs) {
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({70, 33}, {70, 33}, true);
  const std::int64_t nq = metadata.num_q_tokens(), dv = params_.dims.v_head_dim;
  TestTensor q = tensor(nq, params_.dims.qk_head_dim());
  TestTensor k = tensor(nq, params_.dims.qk_head_dim());
  TestTensor v = tensor(nq, dv);
  UsmBuffer out_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads * dv));
  queue_.memset(out_storage.get(), 0x7f, out_storage.bytes());
  const TensorView out =
      TensorView::contiguous(out_storage.get(), DType::float8_e4m3, {nq, params_.num_heads, dv}, MemoryKind::device);
  const float out_scale = 0.02f;
  const InputDescales descales{2.0f / 440.0f, 1.5f / 440.0f, 1.0f / 440.0f};
  backend_->prepare(queue_, metadata);
  backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale_, true, out, out_scale,
                           std::nullopt, descales);
  Queue host = Queue::host();
  reference_->prepare(host, metadata);
  const AttentionResult expected = reference_->run_new_tokens(host, q.host_view, k.host_view, v.host_view, scale_, true,
                                                              std::nullopt, std::nullopt, std::nullopt, descales);
  auto bytes = download(queue_, out);
  const TensorView got = on_host(out, bytes);
  double diff = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < nq * params_.num_heads * dv; ++i) {
    const double value = load_as_float(got.data, got.dtype, i) * out_scale;
    const double want = load_as_float(expected.out.data, expected.out.dtype, i);
    ASSERT_FALSE(std::isnan(value)) << i;
    diff += (value - want) * (value - want);
    norm += want * want;
  }
  EXPECT_LE(std::sqrt(diff / norm), 1e-1);
}

// The MLA step's FP8 quantisation on the backend's queue (quantise_e4m3):
// without a scale the largest magnitude lands on 448 and the scale comes
// back as a float32 on the device; all zeros give the scale 1; a static
// scale is used as given and saturates; padded rows in, padded rows out.
TEST_P(CudaFlashFp8Test, QuantiseFindsTheScaleOnTheQueue) {
  const std::int64_t tokens = 37, dim = params_.dims.v_head_dim;
  TestTensor from = make_tensor(queue_, GetParam().out, tokens, params_.num_heads, dim, 8, rng_, -3.0f, 3.0f);
  const std::int64_t largest_at = from.host_view.offset(20, 1, 5);
  store_from_float(from.host.data(), GetParam().out, largest_at, -3.5f);
  testing::to_device(queue_, from);
  UsmBuffer to_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(tokens * params_.num_heads * (dim + 16)));
  TensorView to = TensorView::contiguous(to_storage.get(), DType::float8_e4m3, {tokens, params_.num_heads, dim},
                                         MemoryKind::device);
  to.stride = {params_.num_heads * (dim + 16), dim + 16, 1, 0};
  DescaleTensor scratch(queue_, {-1.0f, -1.0f});
  auto* const words = static_cast<float*>(scratch.device.get());
  const Descale found = backend_->quantise_e4m3(queue_, from.device_view, to, std::nullopt, words);
  ASSERT_TRUE(found.is_tensor());
  float scale = 0.0f;
  queue_.memcpy(&scale, found.values.data, sizeof scale);
  std::vector<std::uint8_t> bytes(to_storage.bytes());
  queue_.memcpy(bytes.data(), to_storage.get(), bytes.size());
  queue_.wait();
  EXPECT_EQ(scale, 3.5f / 448.0f);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < params_.num_heads; ++h) {
      for (std::int64_t d = 0; d < dim; ++d) {
        const float value = load_as_float(from.host.data(), GetParam().out, from.host_view.offset(t, h, d));
        ASSERT_EQ(bytes[static_cast<std::size_t>(to.offset(t, h, d))], numeric::float_to_fp8_e4m3(value / scale))
            << t << " " << h << " " << d;
      }
    }
  }
  EXPECT_EQ(bytes[static_cast<std::size_t>(to.offset(20, 1, 5))], 0xfeu);  // -448
  // A static scale: a host descale, values past 448 saturate.
  const Descale given = backend_->quantise_e4m3(queue_, from.device_view, to, 0.005f, words);
  ASSERT_FALSE(given.is_tensor());
  EXPECT_EQ(given.value, 0.005f);
  queue_.memcpy(bytes.data(), to_storage.get(), bytes.size());
  queue_.wait();
  EXPECT_EQ(bytes[static_cast<std::size_t>(to.offset(20, 1, 5))], 0xfeu);  // -700 saturated
  // All zeros: the scale 1.
  TestTensor zeros = make_tensor(queue_, GetParam().out, 3, params_.num_heads, dim, 0, rng_, 0.0f, 0.0f);
  const Descale one = backend_->quantise_e4m3(
      queue_, zeros.device_view,
      TensorView::contiguous(to_storage.get(), DType::float8_e4m3, {3, params_.num_heads, dim}, MemoryKind::device),
      std::nullopt, words);
  ASSERT_TRUE(one.is_tensor());
  queue_.memcpy(&scale, one.values.data, sizeof scale);
  queue_.wait();
  EXPECT_EQ(scale, 1.0f);
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaFlashFp8Test,
                         ::testing::Values(Fp8Case{DType::bfloat16, {128, 64, 128}},
                                           Fp8Case{DType::float16, {64, 64, 128}},
                                           Fp8Case{DType::bfloat16, {192, 64, 256}},
                                           Fp8Case{DType::float16, {192, 64, 256}}),
                         case_name);

}  // namespace
}  // namespace mla
