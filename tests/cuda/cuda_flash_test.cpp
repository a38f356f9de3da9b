// CUDA_FLASH against the fp64 REFERENCE on shapes aimed at the kernel's own
// edges: lengths around every tile size, many sequences of the heavy-first
// work list, keys beyond queries, chunks without keys, fp8 output, both merge
// paths, and the argument checks that only this backend makes. The shared
// conformance suite (conformance_cuda_flash) covers the contract as a whole.
//
// Compiled once per kernel and device: CUDA_FLASH on a CUDA device, and
// (MLA_TEST_EMULATED_CUDA) the same backend class and kernel source run by the
// GPU emulator on the host queue; HOPPER_FLASH likewise (MLA_TEST_HOPPER on a
// 9.0 device, MLA_TEST_EMULATED_HOPPER under the emulator). There the threads of a block are resumed in reverse order
// (the emulated conformance suite uses the forward order), so that a missing barrier between warps shows up one way or
// the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "builtin_entries.hpp"
#include "config/scoped_env.hpp"
#include "cuda/hopper_config.hpp"
#include "gpu_test_support.hpp"
#include "log_capture.hpp"
#include "mla/config.hpp"
#if defined(MLA_TEST_EMULATED_CUDA) || defined(MLA_TEST_EMULATED_HOPPER)
#define MLA_TEST_EMULATED 1
#include "simt/emulated_backends.hpp"
#include "simt/emulator.hpp"
#include "simt/hopper_flash_emulated.hpp"
#endif

// Keys of the longest sequence in the split-KV test.
#ifndef MLA_SPLIT_TEST_KEYS
#define MLA_SPLIT_TEST_KEYS 20000
#endif

namespace mla {
namespace {

using testing::close_to_reference;
using testing::download;
using testing::make_tensor;
using testing::on_host;
using testing::TestTensor;

struct Case {
  DType dtype;
  MlaDims dims;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.dtype)) + "_" + std::to_string(info.param.dims.qk_head_dim()) + "_" +
         std::to_string(info.param.dims.v_head_dim);
}

class CudaFlashTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
#if defined(MLA_TEST_EMULATED)
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
      GTEST_SKIP() << "HOPPER_FLASH runs on compute capability 9.0 only; device 0 is "
                   << queue_.capability().describe();
    }
    const BackendEntry entry = detail::hopper_flash_backend_entry();
#else
    const BackendEntry entry = detail::cuda_flash_backend_entry();
#endif
#endif
    params_.num_heads = 3;
    params_.dims = GetParam().dims;
    params_.dtype = GetParam().dtype;
    scale_ = 1.0f / std::sqrt(static_cast<float>(params_.dims.qk_head_dim()));
    backend_ = entry.factory(params_);
    reference_ = detail::reference_backend_entry().factory(params_);
  }

#if defined(MLA_TEST_EMULATED)
  void TearDown() override {
    simt::set_schedule(simt::Schedule::forward);
    if (!IsSkipped()) std::printf("[ emulator ] %s\n", simt::describe(simt::statistics()).c_str());
  }
#endif

  double out_tolerance() const { return params_.dtype == DType::bfloat16 ? 1e-2 : 2e-3; }
  double lse_tolerance() const { return params_.dtype == DType::bfloat16 ? 1e-2 : 1e-3; }
  TestTensor tensor(std::int64_t tokens, std::int64_t dim, std::int64_t pad = 0) {
    return make_tensor(queue_, params_.dtype, tokens, params_.num_heads, dim, pad, rng_, -2.0f, 2.0f);
  }

  // New tokens on both backends, compared; q and v with padded rows; into
  // the caller's `out` when given, else the backend's own.
  void check_new_tokens(const PrefillMetadata& metadata, std::optional<TensorView> out = std::nullopt) {
    const std::int64_t nq = metadata.num_q_tokens();
    const std::int64_t nk = metadata.num_k_tokens();
    TestTensor q = tensor(nq, params_.dims.qk_head_dim(), 8);
    TestTensor k = tensor(nk, params_.dims.qk_head_dim());
    TestTensor v = tensor(nk, params_.dims.v_head_dim, 24);
    backend_->prepare(queue_, metadata);
    const AttentionResult result =
        backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale_, true, out);
    if (out) {
      EXPECT_EQ(result.out.data, out->data) << "the caller's out was not used";
    }
    Queue host = Queue::host();
    reference_->prepare(host, metadata);
    const AttentionResult expected =
        reference_->run_new_tokens(host, q.host_view, k.host_view, v.host_view, scale_, true);
    auto out_bytes = download(queue_, result.out);
    auto lse_bytes = download(queue_, result.lse);
    EXPECT_TRUE(close_to_reference(on_host(result.out, out_bytes), on_host(result.lse, lse_bytes), expected.out,
                                   expected.lse, out_tolerance(), lse_tolerance()));
  }

  Queue queue_ = Queue::host();
  BackendParams params_;
  float scale_ = 1.0f;
  std::unique_ptr<PrefillBackend> backend_;
  std::unique_ptr<PrefillBackend> reference_;
  std::mt19937 rng_{20240531};
};

TEST_P(CudaFlashTest, LengthsAroundEveryTileSize) {
  // Around 16 (a warp's rows), 32/64 (key tiles) and 64/128 (query tiles).
  const std::vector<int> lengths = {1, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 257};
  check_new_tokens(PrefillMetadata::from_lengths(lengths, lengths, true));
}

TEST_P(CudaFlashTest, ManySequencesInHeavyFirstOrder) {
  std::uniform_int_distribution<int> length(0, 420);
  std::vector<int> lengths(37);
  for (int& l : lengths) l = length(rng_);
  check_new_tokens(PrefillMetadata::from_lengths(lengths, lengths, true));
}

TEST_P(CudaFlashTest, MoreKeysThanQueriesAndTheReverse) {
  // Bottom-right causal: the 3-query sequence sees 300 keys; the 200-query
  // sequence with 70 keys has 130 leading rows without keys (0 and -inf).
  check_new_tokens(PrefillMetadata::from_lengths({3, 200, 129}, {300, 70, 129}, true));
}

// Row maxima that creep up over many key tiles: 40 queries each see about
// 1,080 keys (17 to 35 key tiles, whichever way a kernel walks them), whose
// scores rise by about 0.5 per 128 keys on head 0 and fall as much on head 1
// (so one of them rises in either walk), random on head 2. A rescale of O
// skipped or applied late in one step leaves a whole row off by e^0.5 or so;
// compared row by row, since the rest of the rows would hide it in a norm.
TEST_P(CudaFlashTest, RowMaximaRisingSlowlyOverManyKeyTiles) {
  const int nq = 40, nk = 1100;
  const std::int64_t dqk = params_.dims.qk_head_dim(), dv = params_.dims.v_head_dim;
  TestTensor q = tensor(nq, dqk);
  TestTensor k = tensor(nk, dqk);
  TestTensor v = tensor(nk, dv);
  const double per_key = 0.5 / 128 / scale_;  // key 0's first element per key, for 0.5 of score per 128 keys
  for (int h = 0; h < params_.num_heads; ++h) {
    for (int t = 0; t < nq; ++t) {
      for (std::int64_t d = 0; d < dqk; ++d) {
        store_from_float(q.host.data(), params_.dtype, q.host_view.offset(t, h, d), d == 0 ? 1.0f : 0.0f);
      }
    }
    if (h == 2) continue;
    for (int j = 0; j < nk; ++j) {
      const double ramp = (h == 0 ? j : nk - 1 - j) * per_key;
      store_from_float(k.host.data(), params_.dtype, k.host_view.offset(j, h, 0), static_cast<float>(ramp));
    }
  }
  testing::to_device(queue_, q);
  testing::to_device(queue_, k);
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({nq}, {nk}, true);
  backend_->prepare(queue_, metadata);
  const AttentionResult result =
      backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale_, true);
  Queue host = Queue::host();
  reference_->prepare(host, metadata);
  const AttentionResult expected =
      reference_->run_new_tokens(host, q.host_view, k.host_view, v.host_view, scale_, true);
  auto out_bytes = download(queue_, result.out);
  const TensorView got = on_host(result.out, out_bytes);
  for (int t = 0; t < nq; ++t) {
    for (int h = 0; h < params_.num_heads; ++h) {
      double diff = 0.0, norm = 0.0;
      for (std::int64_t d = 0; d < dv; ++d) {
        const double a = load_as_float(got.data, got.dtype, got.offset(t, h, d));
        const double b = load_as_float(expected.out.data, expected.out.dtype, expected.out.offset(t, h, d));
        diff += (a - b) * (a - b);
        norm += b * b;
      }
      ASSERT_LE(std::sqrt(diff / norm), out_tolerance()) << "row " << t << ", head " << h;
    }
  }
}

// New tokens into the caller's out, each head's row padded by 8 NaN
// elements: the view matches REFERENCE (it starts random, so a row left
// unwritten shows) and the padding stays NaN. Sequences of 130 and 64 rows
// give whole 64-row halves of a tile (stored by TMA under
// MLA_HOPPER_TMA_STORE=1) beside rows at a sequence's end.
TEST_P(CudaFlashTest, NewTokensIntoPaddedCallerOut) {
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({130, 64, 3}, {130, 64, 3}, true);
  const std::int64_t nq = metadata.num_q_tokens();
  const std::int64_t dv = params_.dims.v_head_dim;
  TestTensor out = tensor(nq, dv, 8);
  check_new_tokens(metadata, out.device_view);
  const auto bytes = download(queue_, out.device_view);
  const auto elements = static_cast<std::int64_t>(bytes.size() / dtype_size(params_.dtype));
  for (std::int64_t t = 0; t < nq; ++t) {
    for (std::int64_t h = 0; h < params_.num_heads; ++h) {
      for (std::int64_t d = dv; d < dv + 8; ++d) {
        const std::int64_t at = t * out.device_view.stride[0] + h * out.device_view.stride[1] + d;
        if (at >= elements) continue;  // past the view's last element: not downloaded
        ASSERT_TRUE(std::isnan(load_as_float(bytes.data(), params_.dtype, at))) << t << "," << h;
      }
    }
  }
}

#if defined(MLA_TEST_HOPPER) || defined(MLA_TEST_EMULATED_HOPPER)
// HOPPER_FLASH's two epilogues round O the same way: MLA_HOPPER_TMA_STORE=1
// (staged, by TMA and by 16-byte stores) gives the bits of the epilogue
// from registers, for whole 64-row halves and for halves cut by a
// sequence's end alike.
TEST_P(CudaFlashTest, TmaStoreEpilogueGivesTheRegisterEpiloguesBits) {
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({130, 5, 64}, {200, 5, 64}, true);
  const std::int64_t nq = metadata.num_q_tokens();
  const std::int64_t nk = metadata.num_k_tokens();
  TestTensor q = tensor(nq, params_.dims.qk_head_dim());
  TestTensor k = tensor(nk, params_.dims.qk_head_dim());
  TestTensor v = tensor(nk, params_.dims.v_head_dim);
  backend_->prepare(queue_, metadata);
  const auto run = [&](const char* tma_store) {
    const test::ScopedEnv epilogue("MLA_HOPPER_TMA_STORE", std::string(tma_store));
    const AttentionResult result =
        backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale_, true);
    return std::make_pair(download(queue_, result.out), download(queue_, result.lse));
  };
  const auto registers = run("0");
  const auto staged = run("1");
  EXPECT_EQ(registers.first, staged.first) << "the TMA-store epilogue changes the output";
  EXPECT_EQ(registers.second, staged.second) << "the TMA-store epilogue changes the LSE";
}
#endif

TEST_P(CudaFlashTest, NonCausalNewTokens) {
  check_new_tokens(PrefillMetadata::from_lengths({77, 1, 190}, {140, 33, 0}, false));
}

TEST_P(CudaFlashTest, NegativeAndZeroScales) {
  // A kernel may find a row's max on the raw scores (HOPPER_FLASH does on
  // unmasked tiles): a negative scale makes the raw minimum the max, and 0
  // weighs every key alike. -3 spreads a row's scores over hundreds of
  // powers of two: exp2 overflows unless the row's true max is subtracted.
  // 200 keys span unmasked and masked key tiles.
  for (const float scale : {-3.0f, 0.0f}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    scale_ = scale;
    check_new_tokens(PrefillMetadata::from_lengths({200, 3}, {200, 70}, false));
    check_new_tokens(PrefillMetadata::from_lengths({200}, {200}, true));
  }
}

TEST_P(CudaFlashTest, ContextChunkWithEmptySequences) {
  PrefillMetadata metadata = PrefillMetadata::from_lengths({65, 9, 130}, {65, 9, 130}, true);
  metadata.add_chunk({0, 200, 0});
  TestTensor q = tensor(metadata.num_q_tokens(), params_.dims.qk_head_dim());
  TestTensor k = tensor(200, params_.dims.qk_head_dim());
  TestTensor v = tensor(200, params_.dims.v_head_dim);
  // The caller's out and lse, NaN before the call: the rows without keys
  // must be written, not left as the allocation found them.
  const std::int64_t nq = metadata.num_q_tokens(), dv = params_.dims.v_head_dim;
  UsmBuffer out_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads * dv) * 2);
  UsmBuffer lse_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads) * 4);
  queue_.memset(out_storage.get(), 0xff, out_storage.bytes());
  queue_.memset(lse_storage.get(), 0xff, lse_storage.bytes());
  const TensorView caller_out =
      TensorView::contiguous(out_storage.get(), params_.dtype, {nq, params_.num_heads, dv}, MemoryKind::device);
  const TensorView caller_lse =
      TensorView::contiguous(lse_storage.get(), DType::float32, {params_.num_heads, nq}, MemoryKind::device);
  backend_->prepare(queue_, metadata);
  const AttentionResult result = backend_->run_context_chunk(queue_, 0, q.device_view, k.device_view, v.device_view,
                                                             scale_, caller_out, caller_lse);
  ASSERT_EQ(result.out.data, caller_out.data);
  ASSERT_EQ(result.lse.data, caller_lse.data);
  Queue host = Queue::host();
  reference_->prepare(host, metadata);
  const AttentionResult expected =
      reference_->run_context_chunk(host, 0, q.host_view, k.host_view, v.host_view, scale_);
  auto out_bytes = download(queue_, result.out);
  auto lse_bytes = download(queue_, result.lse);
  const TensorView out = on_host(result.out, out_bytes);
  const TensorView lse = on_host(result.lse, lse_bytes);
  EXPECT_TRUE(close_to_reference(out, lse, expected.out, expected.lse, out_tolerance(), lse_tolerance()));
  // Rows of the sequences without keys: exactly 0 and -inf.
  for (std::int64_t t : {std::int64_t{0}, std::int64_t{64}, std::int64_t{74}, std::int64_t{203}}) {
    for (std::int64_t h = 0; h < params_.num_heads; ++h) {
      EXPECT_EQ(load_as_float(lse.data, DType::float32, lse.offset(h, t)), -INFINITY) << t;
      for (std::int64_t d = 0; d < dv; ++d) {
        ASSERT_EQ(load_as_float(out.data, out.dtype, out.offset(t, h, d)), 0.0f) << t << "," << h << "," << d;
      }
    }
  }
}

// Split-KV with query tiles that fill both of HOPPER_FLASH's consumer
// warpgroups (rows 64-127) and a second query tile: 150 and 70 queries,
// bottom-right causal against 1,200 and 900 keys, and a context chunk of
// 300 and 200 keys (a step splits only with context chunks), 3 key ranges
// forced, so every partial and its merge covers rows past the first 64 of
// a tile.
TEST_P(CudaFlashTest, SplitKvWithLongQueryRanges) {
#if defined(MLA_TEST_EMULATED)
  if (GetParam().dims.qk_head_dim() != 192 || GetParam().dtype != DType::bfloat16) {
    GTEST_SKIP() << "emulated: split-KV runs on bfloat16 192/128 only";
  }
#endif
  const test::ScopedEnv splits("MLA_KV_SPLITS", "3");
  PrefillMetadata metadata = PrefillMetadata::from_lengths({150, 70}, {1200, 900}, true);
  metadata.add_chunk({300, 200});
  const std::int64_t nq = metadata.num_q_tokens(), nk = metadata.num_k_tokens();
  const std::int64_t dv = params_.dims.v_head_dim;
  TestTensor q = tensor(nq, params_.dims.qk_head_dim(), 8);
  TestTensor k = tensor(nk, params_.dims.qk_head_dim());
  TestTensor v = tensor(nk, dv, 24);
  TestTensor chunk_k = tensor(500, params_.dims.qk_head_dim());
  TestTensor chunk_v = tensor(500, dv);
  UsmBuffer out_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads * dv) * 2);
  UsmBuffer lse_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads) * 4);
  queue_.memset(out_storage.get(), 0xff, out_storage.bytes());
  AttentionResult result;
  result.out =
      TensorView::contiguous(out_storage.get(), params_.dtype, {nq, params_.num_heads, dv}, MemoryKind::device);
  result.lse = TensorView::contiguous(lse_storage.get(), DType::float32, {params_.num_heads, nq}, MemoryKind::device);
  UsmBuffer workspace = UsmBuffer::device(queue_, prefill_step_workspace_size(params_, metadata));
  run_prefill_step(*backend_, queue_, metadata, q.device_view, k.device_view, v.device_view, {chunk_k.device_view},
                   {chunk_v.device_view}, scale_, {result.out, result.lse, workspace.get(), workspace.bytes()});
  Queue host = Queue::host();
  const AttentionResult expected = run_prefill_step(*reference_, host, metadata, q.host_view, k.host_view, v.host_view,
                                                    {chunk_k.host_view}, {chunk_v.host_view}, scale_);
  auto out_bytes = download(queue_, result.out);
  auto lse_bytes = download(queue_, result.lse);
  EXPECT_TRUE(close_to_reference(on_host(result.out, out_bytes), on_host(result.lse, lse_bytes), expected.out,
                                 expected.lse, out_tolerance(), lse_tolerance()));
#if defined(MLA_TEST_EMULATED)
  // Per attention call the split kernel and its merge, then the step's LSE merge: both calls split.
  EXPECT_EQ(simt::statistics().launches, 5u);
#endif
}

// Split-KV: few queries against long key ranges (the shape that leaves most
// of a GPU idle), through run_prefill_step with the caller's workspace, which
// lends the backend its split scratch: new tokens causal against more keys
// than queries, and a context chunk with an empty sequence. Under the
// emulator (whose host queue has no multiprocessor count) MLA_KV_SPLITS
// forces 5 splits, which leaves the short sequences' later ranges empty; on a
// GPU the step runs forced and as the heuristic decides. Each run matches
// REFERENCE, a second run gives the same bits, and so does, with the split
// count forced, the step from device metadata.
TEST_P(CudaFlashTest, SplitKvStepMatchesReferenceAndRepeatsBitwise) {
#if defined(MLA_TEST_EMULATED)
  // The emulator takes seconds per thousand keys: one shape per kernel.
  if (GetParam().dims.qk_head_dim() != 192 || GetParam().dtype != DType::bfloat16) {
    GTEST_SKIP() << "emulated: split-KV runs on bfloat16 192/128 only";
  }
#endif
  PrefillMetadata metadata = PrefillMetadata::from_lengths({1, 16, 5}, {1031, 16, MLA_SPLIT_TEST_KEYS}, true);
  metadata.add_chunk({2000, 0, 3});
  const std::int64_t nq = metadata.num_q_tokens();
  const std::int64_t nk = metadata.num_k_tokens();
  const std::int64_t nc = metadata.chunks[0].cu_seqlens_k.back();
  const std::int64_t dv = params_.dims.v_head_dim;
  TestTensor q = tensor(nq, params_.dims.qk_head_dim(), 8);
  TestTensor k = tensor(nk, params_.dims.qk_head_dim());
  TestTensor v = tensor(nk, dv);
  TestTensor chunk_k = tensor(nc, params_.dims.qk_head_dim());
  TestTensor chunk_v = tensor(nc, dv, 24);
  Queue host = Queue::host();
  const AttentionResult expected = run_prefill_step(*reference_, host, metadata, q.host_view, k.host_view, v.host_view,
                                                    {chunk_k.host_view}, {chunk_v.host_view}, scale_);

  UsmBuffer out_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads * dv) * 2);
  UsmBuffer lse_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads) * 4);
  const TensorView out =
      TensorView::contiguous(out_storage.get(), params_.dtype, {nq, params_.num_heads, dv}, MemoryKind::device);
  const TensorView lse =
      TensorView::contiguous(lse_storage.get(), DType::float32, {params_.num_heads, nq}, MemoryKind::device);
  UsmBuffer workspace = UsmBuffer::device(queue_, prefill_step_workspace_size(params_, metadata));
  const PrefillStepBuffers buffers{out, lse, workspace.get(), workspace.bytes()};
  const auto run = [&] {
    queue_.memset(out_storage.get(), 0xff, out_storage.bytes());
    queue_.memset(lse_storage.get(), 0xff, lse_storage.bytes());
    run_prefill_step(*backend_, queue_, metadata, q.device_view, k.device_view, v.device_view, {chunk_k.device_view},
                     {chunk_v.device_view}, scale_, buffers);
    return std::make_pair(download(queue_, out), download(queue_, lse));
  };
#if defined(MLA_TEST_EMULATED)
  const char* const modes[] = {"5"};
#else
  const char* const modes[] = {"5", nullptr};
#endif
  for (const char* mode : modes) {
    SCOPED_TRACE(mode == nullptr ? "heuristic" : std::string("MLA_KV_SPLITS=") + mode);
    const test::ScopedEnv splits("MLA_KV_SPLITS", mode == nullptr ? std::nullopt : std::optional<std::string>(mode));
    // The choice reaches the library's log at debug level.
    std::vector<std::string> lines;
    auto first = [&] {
      const ScopedLogCapture capture(lines);
      return run();
    }();
    if (mode != nullptr) {
      EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
        return line.find("context chunk 0: 5 splits, MLA_KV_SPLITS=5") != std::string::npos;
      })) << "no split choice in the debug log";
    }
    EXPECT_TRUE(close_to_reference(on_host(out, first.first), on_host(lse, first.second), expected.out, expected.lse,
                                   out_tolerance(), lse_tolerance()));
    const auto second = run();
    EXPECT_EQ(first.first, second.first) << "a second run changes the output";
    EXPECT_EQ(first.second, second.second) << "a second run changes the LSE";
    if (mode == nullptr) continue;
    // The same step from device metadata: with the split count fixed, the
    // key ranges are the same, and so are the bits.
    const auto upload = [&](const std::vector<std::int32_t>& values) {
      UsmBuffer buffer = UsmBuffer::device(queue_, values.size() * sizeof(std::int32_t));
      queue_.memcpy(buffer.get(), values.data(), buffer.bytes());
      return buffer;
    };
    const UsmBuffer cu_q = upload(metadata.cu_seqlens_q), cu_k = upload(metadata.cu_seqlens_k),
                    cu_chunk = upload(metadata.chunks[0].cu_seqlens_k);
    DevicePrefillMetadata device;
    device.batch_size = metadata.batch_size();
    device.cu_seqlens_q = cu_q.as<const std::int32_t>();
    device.cu_seqlens_k = cu_k.as<const std::int32_t>();
    device.num_q_tokens = nq;
    device.num_k_tokens = nk;
    device.max_seqlen_q = metadata.max_seqlen_q;
    device.max_seqlen_k = metadata.max_seqlen_k;
    device.causal = true;
    device.chunks.push_back({cu_chunk.as<const std::int32_t>(), nc, metadata.chunks[0].max_seqlen_k});
    queue_.memset(out_storage.get(), 0xff, out_storage.bytes());
    queue_.memset(lse_storage.get(), 0xff, lse_storage.bytes());
    run_prefill_step(*backend_, queue_, device, q.device_view, k.device_view, v.device_view, {chunk_k.device_view},
                     {chunk_v.device_view}, scale_, buffers);
    EXPECT_EQ(download(queue_, out), first.first) << "device metadata changes the output";
    EXPECT_EQ(download(queue_, lse), first.second) << "device metadata changes the LSE";
  }
#if defined(MLA_TEST_EMULATED)
  // Per run (three): both attention calls split, each followed by the merge
  // of its partials, and the step's one LSE merge.
  EXPECT_EQ(simt::statistics().launches, 3u * 5u);
#endif
}

TEST_P(CudaFlashTest, Fp8OutputIntoAPoisonedBuffer) {
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({100, 33}, {100, 33}, true);
  const std::int64_t nq = metadata.num_q_tokens();
  const std::int64_t dv = params_.dims.v_head_dim;
  TestTensor q = tensor(nq, params_.dims.qk_head_dim());
  TestTensor k = tensor(nq, params_.dims.qk_head_dim());
  TestTensor v = tensor(nq, dv);
  // fp8 out with 16 padding bytes per row: NaN (0x7f) everywhere before the call.
  UsmBuffer out_storage = UsmBuffer::device(queue_, static_cast<std::size_t>(nq * params_.num_heads * (dv + 16)));
  queue_.memset(out_storage.get(), 0x7f, out_storage.bytes());
  TensorView out =
      TensorView::contiguous(out_storage.get(), DType::float8_e4m3, {nq, params_.num_heads, dv}, MemoryKind::device);
  out.stride = {params_.num_heads * (dv + 16), dv + 16, 1, 0};
  const float out_scale = 0.05f;
  ASSERT_TRUE(backend_->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor));
  backend_->prepare(queue_, metadata);
  backend_->run_new_tokens(queue_, q.device_view, k.device_view, v.device_view, scale_, false, out, out_scale);
  Queue host = Queue::host();
  reference_->prepare(host, metadata);
  const AttentionResult expected =
      reference_->run_new_tokens(host, q.host_view, k.host_view, v.host_view, scale_, false);
  std::vector<std::uint8_t> bytes(out_storage.bytes());  // padding included
  queue_.memcpy(bytes.data(), out_storage.get(), bytes.size());
  queue_.wait();
  const TensorView got = on_host(out, bytes);
  for (std::int64_t t = 0; t < nq; ++t) {
    for (std::int64_t h = 0; h < params_.num_heads; ++h) {
      for (std::int64_t d = 0; d < dv; ++d) {
        const float value = load_as_float(got.data, got.dtype, got.offset(t, h, d)) * out_scale;
        const float want = load_as_float(expected.out.data, expected.out.dtype, expected.out.offset(t, h, d));
        ASSERT_FALSE(std::isnan(value)) << t << "," << h << "," << d;
        ASSERT_NEAR(value, want, 0.1 * std::fabs(want) + 0.5 * out_scale) << t << "," << h << "," << d;
      }
      // The padding after the row was not written.
      EXPECT_EQ(bytes[static_cast<std::size_t>(got.offset(t, h, dv))], 0x7f);
    }
  }
}

TEST_P(CudaFlashTest, RejectsOperandsTheKernelCannotRead) {
  const PrefillMetadata metadata = PrefillMetadata::from_lengths({20}, {20}, true);
  backend_->prepare(queue_, metadata);
  TestTensor q = tensor(20, params_.dims.qk_head_dim(), 8);
  TestTensor k = tensor(20, params_.dims.qk_head_dim());
  TestTensor v = tensor(20, params_.dims.v_head_dim);
  const auto expect_invalid = [&](const TensorView& bad_q, const char* why) {
    try {
      backend_->run_new_tokens(queue_, bad_q, k.device_view, v.device_view, scale_, true);
      ADD_FAILURE() << "accepted " << why;
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument) << why << ": " << error.what();
    }
  };
  TensorView shifted = q.device_view;  // one element past a 16-byte boundary
  shifted.data = static_cast<std::uint8_t*>(q.device.get()) + dtype_size(params_.dtype);
  expect_invalid(shifted, "a misaligned q");
  TensorView odd_rows = q.device_view;
  odd_rows.stride[1] = params_.dims.qk_head_dim() + 1;
  odd_rows.stride[0] = odd_rows.stride[1] * params_.num_heads;
  expect_invalid(odd_rows, "head strides that are not multiples of 16 bytes");
#if !defined(MLA_TEST_EMULATED)  // the emulated device is the host
  TensorView q_host = q.host_view;
  expect_invalid(q_host, "q in host memory");

  Queue host = Queue::host();
  try {
    backend_->prepare(host, metadata);
    ADD_FAILURE() << "prepare on a host queue";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::not_supported) << error.what();
  }
#endif
}

TEST_P(CudaFlashTest, MergeTakesTheVectorAndTheScalarPath) {
  const std::int64_t n = 83;
  const std::int64_t h = params_.num_heads;
  const std::int64_t dv = params_.dims.v_head_dim;
  for (std::int64_t pad : {std::int64_t{0}, std::int64_t{3}}) {  // 3: rows no longer 16-byte aligned
    TestTensor prefix = tensor(n, dv, pad);
    TestTensor suffix = tensor(n, dv, pad);
    TestTensor prefix_lse = make_tensor(queue_, DType::float32, 1, h, n, 0, rng_, -5.0f, 5.0f);
    TestTensor suffix_lse = make_tensor(queue_, DType::float32, 1, h, n, 0, rng_, -5.0f, 5.0f);
    // Empty rows in every combination, +inf as some libraries write them.
    float* p_lse = reinterpret_cast<float*>(prefix_lse.host.data());
    float* s_lse = reinterpret_cast<float*>(suffix_lse.host.data());
    p_lse[0] = -INFINITY;
    s_lse[1] = -INFINITY;
    p_lse[2] = INFINITY;
    s_lse[2] = -INFINITY;
    p_lse[3] = INFINITY;
    queue_.memcpy(prefix_lse.device.get(), prefix_lse.host.data(), prefix_lse.host.size());
    queue_.memcpy(suffix_lse.device.get(), suffix_lse.host.data(), suffix_lse.host.size());
    const auto lse_view = [&](TestTensor& t, bool device) {
      return TensorView::contiguous(device ? t.device.get() : t.host.data(), DType::float32, {h, n},
                                    device ? MemoryKind::device : MemoryKind::host);
    };
    TestTensor out = tensor(n, dv, pad);
    UsmBuffer out_lse = UsmBuffer::device(queue_, static_cast<std::size_t>(h * n) * sizeof(float));
    MergeArgs args{prefix.device_view,
                   lse_view(prefix_lse, true),
                   suffix.device_view,
                   lse_view(suffix_lse, true),
                   out.device_view,
                   TensorView::contiguous(out_lse.get(), DType::float32, {h, n}, MemoryKind::device),
                   n - 5,
                   std::nullopt};
    backend_->merge_attn_states(queue_, args);

    std::vector<std::uint8_t> ref_out(out.host.size());
    std::vector<float> ref_lse(static_cast<std::size_t>(h * n));
    TensorView ref_out_view = out.host_view;
    ref_out_view.data = ref_out.data();
    MergeArgs ref_args{prefix.host_view,
                       lse_view(prefix_lse, false),
                       suffix.host_view,
                       lse_view(suffix_lse, false),
                       ref_out_view,
                       TensorView::contiguous(ref_lse.data(), DType::float32, {h, n}),
                       n - 5,
                       std::nullopt};
    Queue host = Queue::host();
    reference_->merge_attn_states(host, ref_args);
    auto out_bytes = download(queue_, out.device_view);
    auto lse_bytes = download(queue_, args.out_lse);
    EXPECT_TRUE(close_to_reference(on_host(out.device_view, out_bytes), on_host(args.out_lse, lse_bytes), ref_out_view,
                                   ref_args.out_lse, out_tolerance(), 1e-5))
        << "row padding " << pad;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaFlashTest,
                         ::testing::Values(Case{DType::bfloat16, {128, 64, 128}}, Case{DType::float16, {128, 64, 128}},
                                           Case{DType::bfloat16, {64, 64, 128}}, Case{DType::float16, {64, 64, 128}},
                                           Case{DType::bfloat16, {192, 64, 256}}, Case{DType::float16, {192, 64, 256}}),
                         case_name);

}  // namespace
}  // namespace mla
