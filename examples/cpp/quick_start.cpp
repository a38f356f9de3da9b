#include <mla/mla.hpp>

#include <cstdio>

#include "random_tensor.hpp"  // random_tensor(queue, dtype, shape): random values on the queue's device

int main() {
  mla::Config config = mla::resolve_config();  // defaults < YAML < environment
  mla::configure(config);                      // once: log level, plugins, overrides
  mla::Selector selector(config);              // changes nothing outside itself
  mla::SelectorConfig request{mla::DType::bfloat16, mla::deepseek_dims};
  mla::Selection chosen =  // logs "Using X MLA prefill backend."
      selector.select(request, mla::current_platform());
  mla::Queue queue = mla::make_queue(chosen);  // the kind its backend runs on: host
                                               // for KOKKOS, CUDA for CUDA_FLASH...

  mla::BackendParams params{
      .num_heads = 16, .kv_lora_rank = 512, .dims = mla::deepseek_dims, .dtype = mla::DType::bfloat16};
  auto backend = selector.create(chosen, params);  // params' dtype and dims must be the request's

  // Three sequences of 512, 97 and 1 new tokens after 2048, 0 and 17 cached ones.
  auto metadata = mla::PrefillMetadata::from_lengths({512, 97, 1}, {512, 97, 1});
  metadata.add_chunk({2048, 0, 17});  // cached context, one chunk
  const auto bf16 = mla::DType::bfloat16;
  auto q = random_tensor(queue, bf16, {610, 16, 192});  // [Nq, H, P+R]
  auto k = random_tensor(queue, bf16, {610, 16, 192});
  auto v = random_tensor(queue, bf16, {610, 16, 128});  // [Nq, H, V]
  auto chunk_k = random_tensor(queue, bf16, {2065, 16, 192});
  auto chunk_v = random_tensor(queue, bf16, {2065, 16, 128});

  mla::AttentionResult result =  // prepares the backend, runs, merges the chunk
      mla::run_prefill_step(*backend, queue, metadata, q.view, k.view, v.view, {chunk_k.view}, {chunk_v.view},
                            0.0722f);  // the softmax scale, an argument of every call
  queue.wait();                        // result.out [Nq, H, 128], result.lse [H, Nq] (natural log, fp32)
  if (!all_finite(queue, result.out) || !all_finite(queue, result.lse)) return 1;
  std::printf("quick start: %s computed out %s\n", backend->name().c_str(), result.out.describe().c_str());
  return 0;
}
