#include <mla/mla.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "random_tensor.hpp"  // all_finite(queue, view)

// [tokens, heads, dim] random values quantised to e4m3 with one descale per
// head (the head's largest magnitude over 448, as a per-head quantiser
// computes it); the bytes and the descales are copied to the queue.
struct Fp8Tensor {
  mla::OwnedTensor bytes;
  mla::OwnedTensor descales;  // float32 [heads]
};

Fp8Tensor quantised(mla::Queue& queue, std::int64_t tokens, std::int64_t heads, std::int64_t dim) {
  static std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(tokens * heads * dim));
  for (float& x : values) x = normal(rng);
  std::vector<float> descale(static_cast<std::size_t>(heads), 1.0f);
  std::vector<std::uint8_t> bytes(values.size());
  for (std::int64_t h = 0; h < heads; ++h) {
    float amax = 0.0f;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t d = 0; d < dim; ++d)
        amax = std::max(amax, std::fabs(values[static_cast<std::size_t>((t * heads + h) * dim + d)]));
    descale[static_cast<std::size_t>(h)] = amax > 0.0f ? amax / 448.0f : 1.0f;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t d = 0; d < dim; ++d) {
        const std::size_t i = static_cast<std::size_t>((t * heads + h) * dim + d);
        mla::store_from_float(bytes.data(), mla::DType::float8_e4m3, static_cast<std::int64_t>(i),
                              values[i] / descale[static_cast<std::size_t>(h)]);
      }
  }
  Fp8Tensor out{mla::OwnedTensor::device(queue, mla::DType::float8_e4m3, {tokens, heads, dim}),
                mla::OwnedTensor::device(queue, mla::DType::float32, {heads})};
  queue.memcpy(out.bytes.buffer.get(), bytes.data(), bytes.size());
  queue.memcpy(out.descales.buffer.get(), descale.data(), descale.size() * sizeof(float));
  queue.wait();  // the host vectors die at the end of this function
  return out;
}

int main() {
  // e4m3 q, k and v with per-head descales; the output in bf16 (out_dtype is required with fp8 inputs).
  const mla::BackendParams model{
      .num_heads = 16, .dims = mla::deepseek_dims, .dtype = mla::DType::float8_e4m3, .out_dtype = mla::DType::bfloat16};
  // Backends without fp8 inputs are refused with their reason ("dtype float8_e4m3 not supported").
  mla::ChosenBackend chosen = mla::choose_backend(model);

  const auto step = mla::PrefillMetadata::from_lengths({97, 31}, {97, 31});
  Fp8Tensor q = quantised(chosen.queue, 128, 16, 192);
  Fp8Tensor k = quantised(chosen.queue, 128, 16, 192);
  Fp8Tensor v = quantised(chosen.queue, 128, 16, 128);
  const mla::InputDescales descales{mla::Descale::of(q.descales.view), mla::Descale::of(k.descales.view),
                                    mla::Descale::of(v.descales.view)};

  mla::AttentionResult result = mla::run_prefill_step(*chosen.backend, chosen.queue, step, q.bytes.view, k.bytes.view,
                                                      v.bytes.view, {}, {}, 0.0722f, descales);
  chosen.queue.wait();  // result.out bfloat16 [128, 16, 128], result.lse [16, 128]
  if (!all_finite(chosen.queue, result.out) || !all_finite(chosen.queue, result.lse)) return 1;
  std::printf("fp8 inputs: %s computed out %s\n", chosen.backend->name().c_str(), result.out.describe().c_str());
  return 0;
}
