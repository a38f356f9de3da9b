// Shared pieces of the CUDA device tests: the skip-or-fail rule for machines
// without a GPU, random host tensors with poisoned padding, and transfers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "mla/mla.hpp"

namespace mla::testing {

inline bool gpu_required() {
  const char* value = std::getenv("MLA_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

// Skips the test without a CUDA device, or fails it under MLA_REQUIRE_GPU=1.
#define MLA_REQUIRE_CUDA_DEVICE()                                                         \
  do {                                                                                    \
    if (::mla::detect_devices().empty()) {                                                \
      if (::mla::testing::gpu_required()) FAIL() << "no CUDA device (MLA_REQUIRE_GPU=1)"; \
      GTEST_SKIP() << "no CUDA device on this machine";                                   \
    }                                                                                     \
  } while (false)

// A [d0, d1, d2] tensor with rows padded by `pad` elements, on the host and
// (after upload) on a device. Padding holds NaN so a read past the last dim shows.
struct TestTensor {
  std::vector<std::uint8_t> host;
  UsmBuffer device;
  TensorView host_view;
  TensorView device_view;
};

// Copies t.host to a new device buffer and points t.device_view at it (as
// t.host_view, in device memory).
inline void to_device(Queue& queue, TestTensor& t) {
  t.device = UsmBuffer::device(queue, t.host.size());
  queue.memcpy(t.device.get(), t.host.data(), t.host.size());
  t.device_view = t.host_view;
  t.device_view.data = t.device.get();
  t.device_view.memory = MemoryKind::device;
}

inline TestTensor make_tensor(Queue& queue, DType dtype, std::int64_t d0, std::int64_t d1, std::int64_t d2,
                              std::int64_t pad, std::mt19937& rng, float lo, float hi) {
  TestTensor t;
  const std::int64_t row = d2 + pad;
  const std::int64_t elements = std::max<std::int64_t>(d0 * d1 * row, 1);
  t.host.resize(static_cast<std::size_t>(elements) * dtype_size(dtype));
  std::uniform_real_distribution<float> value(lo, hi);
  for (std::int64_t i = 0; i < d0 * d1 * row; ++i) {
    store_from_float(t.host.data(), dtype, i, i % row < d2 ? value(rng) : std::nanf(""));
  }
  t.host_view = TensorView::contiguous(t.host.data(), dtype, {d0, d1, d2}, MemoryKind::host);
  t.host_view.stride = {d1 * row, row, 1, 0};
  to_device(queue, t);
  return t;
}

// Copies a device view's whole extent (its last element's offset + 1) to the host.
inline std::vector<std::uint8_t> download(Queue& queue, const TensorView& view) {
  std::int64_t last = 0;
  for (int d = 0; d < view.rank; ++d)
    last += (view.shape[static_cast<std::size_t>(d)] - 1) * view.stride[static_cast<std::size_t>(d)];
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(view.numel() == 0 ? 0 : last + 1) * dtype_size(view.dtype));
  if (!bytes.empty()) queue.memcpy(bytes.data(), view.data, bytes.size());
  queue.wait();
  return bytes;
}

inline TensorView on_host(const TensorView& view, std::vector<std::uint8_t>& bytes) {
  TensorView host = view;
  host.data = bytes.data();
  host.memory = MemoryKind::host;
  return host;
}

// docs/contract.md §6: relative norm error of out and absolute LSE error against
// the fp64 REFERENCE; NaN never passes, -inf must match -inf.
inline ::testing::AssertionResult close_to_reference(const TensorView& out, const TensorView& lse,
                                                     const TensorView& ref_out, const TensorView& ref_lse,
                                                     double out_tolerance, double lse_tolerance) {
  double diff = 0.0;
  double norm = 0.0;
  for (std::int64_t t = 0; t < out.shape[0]; ++t) {
    for (std::int64_t h = 0; h < out.shape[1]; ++h) {
      for (std::int64_t d = 0; d < out.shape[2]; ++d) {
        const double got = load_as_float(out.data, out.dtype, out.offset(t, h, d));
        const double want = load_as_float(ref_out.data, ref_out.dtype, ref_out.offset(t, h, d));
        if (std::isnan(got)) return ::testing::AssertionFailure() << "NaN in out at " << t << "," << h << "," << d;
        diff += (got - want) * (got - want);
        norm += want * want;
      }
    }
  }
  const double relative = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  if (relative > out_tolerance) return ::testing::AssertionFailure() << "out relative error " << relative;
  if (!lse.empty_view()) {
    for (std::int64_t h = 0; h < lse.shape[0]; ++h) {
      for (std::int64_t t = 0; t < lse.shape[1]; ++t) {
        const float got = load_as_float(lse.data, DType::float32, lse.offset(h, t));
        const float want = load_as_float(ref_lse.data, DType::float32, ref_lse.offset(h, t));
        const bool both_empty = std::isinf(want) && want < 0 && std::isinf(got) && got < 0;
        if (!both_empty && !(std::fabs(got - want) <= lse_tolerance)) {
          return ::testing::AssertionFailure() << "lse[" << h << "," << t << "] = " << got << ", reference " << want;
        }
      }
    }
  }
  return ::testing::AssertionSuccess() << "out relative error " << relative;
}

}  // namespace mla::testing
