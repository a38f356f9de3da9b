#include <mla/mla.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "random_tensor.hpp"  // random_tensor(queue, dtype, shape): random values on the queue's device

int main() {
  mla::Config config = mla::resolve_config();
  mla::configure(config);
  mla::Selector selector(config);
  mla::Selection chosen = selector.select({mla::DType::bfloat16, mla::deepseek_dims}, mla::current_platform());
  mla::BackendParams params{
      .num_heads = 16, .kv_lora_rank = 512, .dims = mla::deepseek_dims, .dtype = mla::DType::bfloat16};
  const float scale = 0.0722f;  // the softmax scale, an argument of every call

  // Once: the engine's queue. An engine on CUDA borrows its stream (cudaStream_t as void*):
  //   mla::Queue queue = mla::Queue::borrow(mla::DeviceBackend::cuda, device, engine_stream);
  // and check_queue raises not_supported, naming both kinds, when the selection runs
  // elsewhere (KOKKOS on a CUDA stream). Here the selection's own queue stands in.
  mla::Queue queue = mla::make_queue(chosen);
  mla::check_queue(chosen.entry.description, queue);
  auto backend = selector.create(chosen, params);

  // The engine's own device memory: two sequences of 5 and 7 new tokens after 16 and 0
  // cached ones; offsets int32 [B+1] and tensors on the device.
  const std::vector<std::int32_t> query_start_loc{0, 5, 12}, chunk_cu_seq_lens{0, 16, 16};
  mla::UsmBuffer cu_q = mla::UsmBuffer::device(queue, 3 * sizeof(std::int32_t));
  mla::UsmBuffer cu_chunk = mla::UsmBuffer::device(queue, 3 * sizeof(std::int32_t));
  queue.memcpy(cu_q.get(), query_start_loc.data(), cu_q.bytes());
  queue.memcpy(cu_chunk.get(), chunk_cu_seq_lens.data(), cu_chunk.bytes());
  const auto bf16 = mla::DType::bfloat16;
  auto q = random_tensor(queue, bf16, {12, 16, 192}), k = random_tensor(queue, bf16, {12, 16, 192});
  auto v = random_tensor(queue, bf16, {12, 16, 128});
  auto chunk_k = random_tensor(queue, bf16, {16, 16, 192}), chunk_v = random_tensor(queue, bf16, {16, 16, 128});
  auto out = mla::OwnedTensor::device(queue, bf16, {12, 16, 128});
  auto lse = mla::OwnedTensor::device(queue, mla::DType::float32, {16, 12});

  // Every step: the metadata as device arrays, which the library does not read back on
  // the GPU backends (host backends read them through the queue).
  mla::DevicePrefillMetadata meta;
  meta.batch_size = 2;
  meta.cu_seqlens_q = cu_q.as<std::int32_t>();
  meta.cu_seqlens_k = cu_q.as<std::int32_t>();
  meta.num_q_tokens = meta.num_k_tokens = 12;
  meta.max_seqlen_q = meta.max_seqlen_k = 7;                     // bounds the grids; must not be short
  meta.chunks.push_back({cu_chunk.as<std::int32_t>(), 16, 16});  // per context chunk

  // The workspace: at least prefill_step_workspace_size bytes, sized once for the largest
  // step, and 64-byte aligned (malloc_device and the GPU runtimes' allocators are).
  const std::size_t workspace_bytes = mla::prefill_step_workspace_size(params, meta);
  mla::UsmBuffer workspace = mla::UsmBuffer::device(queue, workspace_bytes);
  mla::PrefillStepBuffers buffers{out.view, lse.view, workspace.get(), workspace_bytes};
  for (int step = 0; step < 3; ++step) {  // nothing below allocates, copies metadata or waits
    mla::run_prefill_step(*backend, queue, meta, q.view, k.view, v.view, {chunk_k.view}, {chunk_v.view}, scale,
                          buffers);
  }
  queue.wait();
  if (!all_finite(queue, out.view) || !all_finite(queue, lse.view)) return 1;
  std::printf("engine step: %s wrote out %s\n", backend->name().c_str(), out.view.describe().c_str());
  return 0;
}
