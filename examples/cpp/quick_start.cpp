#include <mla/mla.hpp>

#include <cstdio>

#include "random_tensor.hpp"  // random_tensor(queue, dtype, shape): random values on the queue's device

int main() {
  // 1. The model: 16 heads (DeepSeek-V3 at TP8), DeepSeek's head dims, bf16.
  const mla::BackendParams model{.num_heads = 16, .dims = mla::deepseek_dims, .dtype = mla::DType::bfloat16};

  // 2. A backend for it, chosen by the configuration (defaults < YAML < environment; it logs
  //    "Using X MLA prefill backend."), and the queue it runs on: host for KOKKOS, a GPU for CUDA_FLASH.
  mla::ChosenBackend chosen = mla::choose_backend(model);

  // 3. The step: three sequences of 512, 97 and 1 new tokens, each attending to itself.
  const auto step = mla::PrefillMetadata::from_lengths({512, 97, 1}, {512, 97, 1});

  // 4. Tensors on the queue: queries, keys and values of the 610 new tokens.
  auto q = random_tensor(chosen.queue, model.dtype, {610, 16, 192});  // [tokens, heads, 128 + 64]
  auto k = random_tensor(chosen.queue, model.dtype, {610, 16, 192});
  auto v = random_tensor(chosen.queue, model.dtype, {610, 16, 128});  // [tokens, heads, 128]

  mla::AttentionResult result = mla::run_prefill_step(*chosen.backend, chosen.queue, step, q.view, k.view, v.view, {},
                                                      {}, 0.0722f);  // no cached context; the softmax scale
  chosen.queue.wait();  // result.out [610, 16, 128], result.lse [16, 610] (natural log, fp32)
  if (!all_finite(chosen.queue, result.out) || !all_finite(chosen.queue, result.lse)) return 1;
  std::printf("quick start: %s computed out %s\n", chosen.backend->name().c_str(), result.out.describe().c_str());
  return 0;
}
