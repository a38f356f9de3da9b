// The engine path on a real GPU: CUDA_FLASH (HOPPER_FLASH when compiled with
// MLA_TEST_HOPPER, on a 9.0 device) on a borrowed stream, with device
// metadata and the caller's buffers, captured into a CUDA graph and replayed
// after the tensors and the cu_seqlens were rewritten in place. Capture runs
// in global mode, where any cudaMalloc or synchronising call of the library
// would break it. Skips without a GPU, fails under MLA_REQUIRE_GPU=1.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "builtin_entries.hpp"
#include "cuda/hopper_config.hpp"
#include "gpu_test_support.hpp"
#include "mla/mla_step.hpp"

namespace mla {
namespace {

using namespace mla::testing;  // the GPU test helpers

#define MLA_CUDA_OK(call)                                                            \
  do {                                                                               \
    const cudaError_t status_ = (call);                                              \
    ASSERT_EQ(status_, cudaSuccess) << #call << ": " << cudaGetErrorString(status_); \
  } while (false)

// Skips (fails under MLA_REQUIRE_GPU=1) without a CUDA device, and with
// MLA_TEST_HOPPER without a 9.0 one.
#if defined(MLA_TEST_HOPPER)
#define MLA_SKIP_WITHOUT_TEST_DEVICE()                                                                         \
  MLA_REQUIRE_CUDA_DEVICE();                                                                                   \
  do {                                                                                                         \
    const DeviceCapability device0_ = Queue(DeviceBackend::cuda, 0).capability();                              \
    if (!hopper_flash::supports_device(device0_)) {                                                            \
      GTEST_SKIP() << "HOPPER_FLASH runs on compute capability 9.0 only; device 0 is " << device0_.describe(); \
    }                                                                                                          \
  } while (false)
#else
#define MLA_SKIP_WITHOUT_TEST_DEVICE() MLA_REQUIRE_CUDA_DEVICE()
#endif

// The backend the test binary is for: HOPPER_FLASH or CUDA_FLASH.
std::unique_ptr<PrefillBackend> backend_under_test(const BackendParams& params) {
#if defined(MLA_TEST_HOPPER)
  return detail::hopper_flash_backend_entry().factory(params);
#else
  return detail::cuda_flash_backend_entry().factory(params);
#endif
}

// Device copies of a step's cu_seqlens, rewritable in place.
struct DeviceArrays {
  UsmBuffer cu_q, cu_k, chunk_k;
};

void write_arrays(Queue& queue, DeviceArrays& arrays, const PrefillMetadata& metadata) {
  const auto put = [&](UsmBuffer& buffer, const std::vector<std::int32_t>& values) {
    if (!buffer) buffer = UsmBuffer::device(queue, values.size() * sizeof(std::int32_t));
    queue.memcpy(buffer.get(), values.data(), values.size() * sizeof(std::int32_t));
  };
  put(arrays.cu_q, metadata.cu_seqlens_q);
  put(arrays.cu_k, metadata.cu_seqlens_k);
  put(arrays.chunk_k, metadata.chunks.front().cu_seqlens_k);
  queue.wait();
}

TEST(CudaGraph, CapturedPrefillStepReplaysWithNewDataAndMetadata) {
  MLA_SKIP_WITHOUT_TEST_DEVICE();
  cudaStream_t stream = nullptr;
  MLA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    Queue queue = Queue::borrow(DeviceBackend::cuda, 0, stream);
    BackendParams params;
    params.num_heads = 4;
    params.dims = deepseek_dims;
    params.dtype = DType::bfloat16;
    const float scale = 1.0f / std::sqrt(192.0f);
    std::unique_ptr<PrefillBackend> backend = backend_under_test(params);
    std::unique_ptr<PrefillBackend> reference = detail::reference_backend_entry().factory(params);

    // Two steps of the same sizes: the lengths move between sequences.
    PrefillMetadata first = PrefillMetadata::from_lengths({70, 1, 129}, {70, 1, 129});
    first.add_chunk({300, 0, 45});
    PrefillMetadata second = PrefillMetadata::from_lengths({129, 70, 1}, {129, 70, 1});
    second.add_chunk({45, 300, 0});
    const std::int64_t nq = first.num_q_tokens(), nkc = first.chunks.front().cu_seqlens_k.back();

    std::mt19937 rng(7);
    const int dqk = params.dims.qk_head_dim(), dv = params.dims.v_head_dim;
    TestTensor q = make_tensor(queue, params.dtype, nq, 4, dqk, 0, rng, -2, 2);
    TestTensor k = make_tensor(queue, params.dtype, nq, 4, dqk, 0, rng, -2, 2);
    TestTensor v = make_tensor(queue, params.dtype, nq, 4, dv, 0, rng, -2, 2);
    TestTensor ck = make_tensor(queue, params.dtype, nkc, 4, dqk, 0, rng, -2, 2);
    TestTensor cv = make_tensor(queue, params.dtype, nkc, 4, dv, 0, rng, -2, 2);
    DeviceArrays arrays;
    write_arrays(queue, arrays, first);

    DevicePrefillMetadata device;
    device.batch_size = 3;
    device.cu_seqlens_q = arrays.cu_q.as<const std::int32_t>();
    device.cu_seqlens_k = arrays.cu_k.as<const std::int32_t>();
    device.num_q_tokens = nq;
    device.num_k_tokens = nq;
    device.max_seqlen_q = 129;
    device.max_seqlen_k = 129;
    device.chunks.push_back({arrays.chunk_k.as<const std::int32_t>(), nkc, 300});

    OwnedTensor out = OwnedTensor::device(queue, params.dtype, {nq, 4, dv});
    OwnedTensor lse = OwnedTensor::device(queue, DType::float32, {4, nq});
    UsmBuffer workspace = UsmBuffer::device(queue, prefill_step_workspace_size(params, device));
    const PrefillStepBuffers buffers{out.view, lse.view, workspace.get(), workspace.bytes()};
    const std::vector<TensorView> chunk_k{ck.device_view}, chunk_v{cv.device_view};

    cudaGraph_t graph = nullptr;
    MLA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    run_prefill_step(*backend, queue, device, q.device_view, k.device_view, v.device_view, chunk_k, chunk_v, scale,
                     buffers);
    MLA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    MLA_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

    Queue host = Queue::host();
    for (const PrefillMetadata* metadata : {&first, &second}) {
      SCOPED_TRACE(metadata == &first ? "first step" : "second step, rewritten in place");
      if (metadata == &second) {
        // New queries and new lengths, written where the graph reads them.
        const TestTensor fresh = make_tensor(queue, params.dtype, nq, 4, dqk, 0, rng, -2, 2);
        std::copy(fresh.host.begin(), fresh.host.end(), q.host.begin());
        queue.memcpy(q.device.get(), q.host.data(), q.host.size());
        write_arrays(queue, arrays, second);
      }
      MLA_CUDA_OK(cudaGraphLaunch(exec, stream));
      MLA_CUDA_OK(cudaStreamSynchronize(stream));
      const AttentionResult expected = run_prefill_step(*reference, host, *metadata, q.host_view, k.host_view,
                                                        v.host_view, {ck.host_view}, {cv.host_view}, scale);
      auto out_bytes = download(queue, out.view);
      auto lse_bytes = download(queue, lse.view);
      EXPECT_TRUE(close_to_reference(on_host(out.view, out_bytes), on_host(lse.view, lse_bytes), expected.out,
                                     expected.lse, 1e-2, 1e-2));
    }
    MLA_CUDA_OK(cudaGraphExecDestroy(exec));
    MLA_CUDA_OK(cudaGraphDestroy(graph));
  }
  MLA_CUDA_OK(cudaStreamDestroy(stream));
}

// A [d0, 1, d2] test tensor's view as [d0, d2].
TensorView rows_of(TensorView view) {
  view.rank = 2;
  view.shape = {view.shape[0], view.shape[2], 0, 0};
  view.stride = {view.stride[0], 1, 0, 0};
  return view;
}

// The MLA step's up-projection (cuBLASLt for bf16 weights unless
// MLA_CUDA_PROJECTION=own) captured after one warm-up call, as
// docs/kernels/cuda_flash.md asks, and replayed after the latents were rewritten in place: bit for bit
// what an uncaptured call of the same backend on another stream writes.
TEST(CudaGraph, CapturedProjectionAfterAWarmUpReplaysWithNewLatents) {
  MLA_SKIP_WITHOUT_TEST_DEVICE();
  cudaStream_t stream = nullptr;
  MLA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    Queue queue = Queue::borrow(DeviceBackend::cuda, 0, stream);
    Queue other(DeviceBackend::cuda, 0);
    BackendParams params;
    params.num_heads = 4;
    params.dims = deepseek_dims;
    params.dtype = DType::bfloat16;
    std::unique_ptr<PrefillBackend> backend = backend_under_test(params);
    const std::int64_t tokens = 4099, latent = params.kv_lora_rank, heads = params.num_heads;  // two passes
    const std::int64_t p = params.dims.qk_nope_head_dim, dqk = params.dims.qk_head_dim(), dv = params.dims.v_head_dim;
    std::mt19937 rng(11);
    TestTensor x = make_tensor(queue, DType::float32, tokens, 1, latent, 0, rng, -1, 1);
    const TestTensor w = make_tensor(queue, params.dtype, heads * (p + dv), 1, latent, 0, rng, -0.3f, 0.3f);
    const TensorView latents = rows_of(x.device_view), kv_b_proj = rows_of(w.device_view);
    OwnedTensor k = OwnedTensor::device(queue, params.dtype, {tokens, heads, dqk});
    OwnedTensor v = OwnedTensor::device(queue, params.dtype, {tokens, heads, dv});
    OwnedTensor k_direct = OwnedTensor::device(queue, params.dtype, {tokens, heads, dqk});
    OwnedTensor v_direct = OwnedTensor::device(queue, params.dtype, {tokens, heads, dv});

    backend->project_latents(queue, latents, kv_b_proj, k.view, v.view);  // the warm-up
    MLA_CUDA_OK(cudaStreamSynchronize(stream));
    cudaGraph_t graph = nullptr;
    MLA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    backend->project_latents(queue, latents, kv_b_proj, k.view, v.view);
    MLA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    MLA_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round == 0 ? "first replay" : "second replay, latents rewritten in place");
      if (round == 1) {
        const TestTensor fresh = make_tensor(queue, DType::float32, tokens, 1, latent, 0, rng, -1, 1);
        queue.memcpy(x.device.get(), fresh.host.data(), fresh.host.size());
      }
      // Poison: the rope columns must stay as they are, the rest be written.
      for (OwnedTensor* t : {&k, &v, &k_direct, &v_direct}) queue.memset(t->buffer.get(), 0xff, t->buffer.bytes());
      MLA_CUDA_OK(cudaGraphLaunch(exec, stream));
      MLA_CUDA_OK(cudaStreamSynchronize(stream));
      backend->project_latents(other, latents, kv_b_proj, k_direct.view, v_direct.view);
      other.wait();
      EXPECT_EQ(download(queue, k.view), download(queue, k_direct.view)) << "keys";
      EXPECT_EQ(download(queue, v.view), download(queue, v_direct.view)) << "values";
      const std::vector<std::uint8_t> values = download(queue, v.view);
      std::size_t poisoned = 0;
      for (std::size_t i = 0; i + 1 < values.size(); i += 2) poisoned += values[i] == 0xff && values[i + 1] == 0xff;
      EXPECT_EQ(poisoned, 0u) << "values left unwritten";
    }
    MLA_CUDA_OK(cudaGraphExecDestroy(exec));
    MLA_CUDA_OK(cudaGraphDestroy(graph));
  }
  MLA_CUDA_OK(cudaStreamDestroy(stream));
}

// The whole MLA step captured: plan_mla_prefill with the backend keeps the
// attention plan (heaviest-first work lists, split-KV over the context
// chunks), upload_mla_prefill puts it into the workspace outside the
// capture, and run_uploaded_mla_prefill is captured after one warm-up step
// (the projection keeps its algorithm) and replayed: bit for bit what the
// eager run_mla_prefill of the same plan writes.
TEST(CudaGraph, CapturedMlaStepReplaysTheEagerStep) {
  MLA_SKIP_WITHOUT_TEST_DEVICE();
  cudaStream_t stream = nullptr;
  MLA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    Queue queue = Queue::borrow(DeviceBackend::cuda, 0, stream);
    BackendParams params;
    params.num_heads = 4;
    params.dims = deepseek_dims;
    params.dtype = DType::bfloat16;
    std::unique_ptr<PrefillBackend> backend = backend_under_test(params);
    const std::int64_t heads = params.num_heads, latent = params.kv_lora_rank;
    const std::int64_t p = params.dims.qk_nope_head_dim, r = params.dims.qk_rope_head_dim;
    const std::int64_t dv = params.dims.v_head_dim;
    const int block_size = 16, num_blocks = 5;
    MlaStepMetadata metadata;
    metadata.cu_seqlens_q = {0, 5, 12};
    metadata.context_lens = {40, 17};
    metadata.max_blocks = 3;
    metadata.block_table = {3, 0, 4, 1, 2, 0};
    const MlaStepPlan plan = plan_mla_prefill(*backend, queue, metadata, block_size, 24);
    const std::int64_t nq = 12;

    std::mt19937 rng(5);
    const TestTensor q = make_tensor(queue, params.dtype, nq, heads, p + r, 0, rng, -1, 1);
    const TestTensor kv_c = make_tensor(queue, params.dtype, nq, 1, latent, 0, rng, -1, 1);
    const TestTensor k_pe = make_tensor(queue, params.dtype, nq, 1, r, 0, rng, -1, 1);
    const TestTensor cache = make_tensor(queue, params.dtype, num_blocks, block_size, latent + r, 0, rng, -1, 1);
    const TestTensor w = make_tensor(queue, params.dtype, heads * (p + dv), 1, latent, 0, rng, -0.3f, 0.3f);
    const MlaStepInputs in{q.device_view, rows_of(kv_c.device_view), rows_of(k_pe.device_view), cache.device_view,
                           1.0f,          rows_of(w.device_view)};
    OwnedTensor out = OwnedTensor::device(queue, params.dtype, {nq, heads, dv});
    OwnedTensor lse = OwnedTensor::device(queue, DType::float32, {heads, nq});
    OwnedTensor eager_out = OwnedTensor::device(queue, params.dtype, {nq, heads, dv});
    OwnedTensor eager_lse = OwnedTensor::device(queue, DType::float32, {heads, nq});
    UsmBuffer workspace = UsmBuffer::device(queue, plan.workspace_bytes);
    UsmBuffer eager_workspace = UsmBuffer::device(queue, plan.workspace_bytes);
    const float scale = 1.0f / std::sqrt(192.0f);

    run_mla_prefill(*backend, queue, plan, in, {eager_out.view, eager_lse.view},
                    {eager_workspace.get(), eager_workspace.bytes()}, scale);  // also the warm-up
    upload_mla_prefill(*backend, queue, plan, {workspace.get(), workspace.bytes()});
    MLA_CUDA_OK(cudaStreamSynchronize(stream));
    cudaGraph_t graph = nullptr;
    MLA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    run_uploaded_mla_prefill(*backend, queue, plan, in, {out.view, lse.view}, {workspace.get(), workspace.bytes()},
                             scale);
    MLA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    MLA_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      SCOPED_TRACE("replay " + std::to_string(replay));
      queue.memset(out.buffer.get(), 0xff, out.buffer.bytes());
      queue.memset(lse.buffer.get(), 0xff, lse.buffer.bytes());
      MLA_CUDA_OK(cudaGraphLaunch(exec, stream));
      MLA_CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(download(queue, out.view), download(queue, eager_out.view)) << "out";
      EXPECT_EQ(download(queue, lse.view), download(queue, eager_lse.view)) << "lse";
    }
    MLA_CUDA_OK(cudaGraphExecDestroy(exec));
    MLA_CUDA_OK(cudaGraphDestroy(graph));
  }
  MLA_CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace mla
