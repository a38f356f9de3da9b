// What the C++ examples fill their inputs with: random values in [-1, 1],
// written on the host in the tensor's dtype and copied to the queue's device.
#pragma once

#include <mla/mla.hpp>

#include <cstddef>
#include <initializer_list>
#include <random>
#include <vector>

inline mla::OwnedTensor random_tensor(mla::Queue& queue, mla::DType dtype, std::initializer_list<std::int64_t> shape) {
  static std::mt19937 rng(2026);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  mla::OwnedTensor tensor = mla::OwnedTensor::device(queue, dtype, shape);
  std::vector<std::byte> host(tensor.buffer.bytes());
  for (std::int64_t i = 0; i < tensor.view.numel(); ++i) mla::store_from_float(host.data(), dtype, i, uniform(rng));
  queue.memcpy(tensor.buffer.get(), host.data(), host.size());
  queue.wait();  // `host` dies at the end of this function
  return tensor;
}

// True when every element of a [.., .., ..] result on the queue is finite.
inline bool all_finite(mla::Queue& queue, const mla::TensorView& view) {
  std::vector<std::byte> host(static_cast<std::size_t>(view.numel()) * mla::dtype_size(view.dtype));
  queue.memcpy(host.data(), view.data, host.size());
  queue.wait();
  for (std::int64_t i = 0; i < view.numel(); ++i) {
    const float value = mla::load_as_float(host.data(), view.dtype, i);
    if (!(value - value == 0.0f)) return false;
  }
  return true;
}
