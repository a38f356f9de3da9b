#include "conformance/test_tensors.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mla::testing {
namespace {

std::int64_t element_size(DType dtype) { return static_cast<std::int64_t>(dtype_size(dtype)); }

// Calls fn(i0, i1, i2) for every index of a view of rank 1 to 3.
template <class Fn>
void for_each_index(const TensorView& view, Fn&& fn) {
  const std::int64_t n0 = view.rank > 0 ? view.shape[0] : 1;
  const std::int64_t n1 = view.rank > 1 ? view.shape[1] : 1;
  const std::int64_t n2 = view.rank > 2 ? view.shape[2] : 1;
  for (std::int64_t i0 = 0; i0 < n0; ++i0)
    for (std::int64_t i1 = 0; i1 < n1; ++i1)
      for (std::int64_t i2 = 0; i2 < n2; ++i2) fn(i0, i1, i2);
}

// Elements from the view's first to its last element, inclusive.
std::int64_t span_of(const TensorView& view) {
  if (view.numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < view.rank; ++d)
    last += (view.shape[static_cast<std::size_t>(d)] - 1) * view.stride[static_cast<std::size_t>(d)];
  return last + 1;
}

bool is_poison(const std::byte* element, DType dtype) {
  const std::uint32_t bits = poison_bits(dtype);
  return std::memcmp(element, &bits, dtype_size(dtype)) == 0;  // little-endian host
}

std::string where(std::int64_t t, std::int64_t h, std::int64_t d = -1) {
  std::string s = "token " + std::to_string(t) + ", head " + std::to_string(h);
  if (d >= 0) s += ", element " + std::to_string(d);
  return s;
}

}  // namespace

std::uint32_t poison_bits(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 0x7fc00000u;
    case DType::float16:
      return 0x7e00u;
    case DType::bfloat16:
      return 0x7fc0u;
    case DType::float8_e4m3:
      return 0x7fu;
  }
  return 0;
}

HostTensor::HostTensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                       std::int64_t offset, std::int64_t extra)
    : offset_(offset) {
  if (shape.empty() || shape.size() > 3) raise(ErrorCategory::internal, "HostTensor: rank 1 to 3 only");
  if (strides.empty()) {
    strides.assign(shape.size(), 1);
    for (std::size_t d = shape.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  }
  if (strides.size() != shape.size()) raise(ErrorCategory::internal, "HostTensor: one stride per dimension");
  view_.dtype = dtype;
  view_.rank = static_cast<int>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    view_.shape[d] = shape[d];
    view_.stride[d] = strides[d];
  }
  view_.memory = MemoryKind::host;
  storage_elements_ = offset + span_of(view_) + extra;
  storage_.resize(static_cast<std::size_t>(storage_elements_ * element_size(dtype)));
  view_.data = storage_.data() + offset * element_size(dtype);
  poison();
}

float HostTensor::at(std::int64_t i0, std::int64_t i1, std::int64_t i2) const {
  return load_as_float(view_.data, view_.dtype, view_.offset(i0, i1, i2));
}

void HostTensor::set(float value, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  store_from_float(view_.data, view_.dtype, view_.offset(i0, i1, i2), value);
}

void HostTensor::fill_random(std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> uniform(lo, hi);
  for_each_index(view_, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2) {
    float value = 0.0f;
    while (value == 0.0f) value = round_to_dtype(uniform(rng), view_.dtype);
    set(value, i0, i1, i2);
  });
}

void HostTensor::poison() {
  const std::uint32_t bits = poison_bits(view_.dtype);
  const std::size_t size = dtype_size(view_.dtype);
  for (std::size_t i = 0; i + size <= storage_.size(); i += size) std::memcpy(storage_.data() + i, &bits, size);
}

::testing::AssertionResult HostTensor::padding_untouched() const {
  std::vector<bool> covered(static_cast<std::size_t>(storage_elements_), false);
  for_each_index(view_, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2) {
    covered[static_cast<std::size_t>(offset_ + view_.offset(i0, i1, i2))] = true;
  });
  const std::int64_t size = element_size(view_.dtype);
  std::int64_t changed = 0, first = -1;
  for (std::int64_t e = 0; e < storage_elements_; ++e) {
    if (covered[static_cast<std::size_t>(e)] || is_poison(storage_.data() + e * size, view_.dtype)) continue;
    if (changed++ == 0) first = e;
  }
  if (changed == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << changed << " element(s) outside the view " << view_.describe()
                                       << " were written; the first at storage element " << first;
}

DeviceTensor upload(Queue& queue, const HostTensor& host) {
  DeviceTensor device;
  device.buffer = UsmBuffer::device(queue, host.storage_bytes());
  if (host.storage_bytes() > 0) queue.memcpy(device.buffer.get(), host.storage(), host.storage_bytes());
  queue.wait();
  device.view = host.view();
  device.view.data = device.buffer.as<std::byte>() + host.offset() * element_size(host.dtype());
  device.view.memory = MemoryKind::device;
  return device;
}

void download(Queue& queue, const DeviceTensor& device, HostTensor& host) {
  if (host.storage_bytes() != device.buffer.bytes()) raise(ErrorCategory::internal, "download: layouts differ");
  if (host.storage_bytes() > 0) queue.memcpy(host.storage(), device.buffer.get(), host.storage_bytes());
  queue.wait();
}

HostTensor download(Queue& queue, const TensorView& view) {
  if (view.empty_view()) return HostTensor();
  std::vector<std::int64_t> shape(view.shape.begin(), view.shape.begin() + view.rank);
  std::vector<std::int64_t> strides(view.stride.begin(), view.stride.begin() + view.rank);
  HostTensor host(view.dtype, shape, strides);
  if (host.storage_bytes() > 0) queue.memcpy(host.storage(), view.data, host.storage_bytes());
  queue.wait();
  return host;
}

Tolerance tolerance_for(DType input_dtype) {
  switch (input_dtype) {
    case DType::float32:
      return {1e-5, 1e-3};
    case DType::float16:
      return {2e-3, 1e-3};
    case DType::bfloat16:
      return {1e-2, 1e-2};
    case DType::float8_e4m3:
      break;  // fp8 inputs take their output dtype's bounds, an fp8 output those of §6
  }
  throw std::invalid_argument("tolerance_for: " + std::string(dtype_name(input_dtype)) +
                              " is not an input dtype; build the Tolerance of an fp8 output from the input's");
}

::testing::AssertionResult results_match(const TensorView& out, const TensorView& lse, const TensorView& ref_out,
                                         const TensorView& ref_lse, const Tolerance& tolerance) {
  if (out.rank != 3 || out.shape != ref_out.shape)
    return ::testing::AssertionFailure() << "out is " << out.describe() << ", the reference " << ref_out.describe();
  const bool has_lse = !lse.empty_view();
  if (has_lse && (lse.rank != 2 || lse.shape != ref_lse.shape))
    return ::testing::AssertionFailure() << "lse is " << lse.describe() << ", the reference " << ref_lse.describe();
  const std::int64_t tokens = ref_out.size(0), heads = ref_out.size(1), dim = ref_out.size(2);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  std::ostringstream problems;
  std::int64_t problem_count = 0;
  const auto report = [&](const std::string& text) {
    if (problem_count++ < 5) problems << "\n  " << text;
  };
  double error_sq = 0.0, ref_sq = 0.0, max_lse_error = 0.0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const float ref_l = load_as_float(ref_lse.data, DType::float32, ref_lse.offset(h, t));
      if (has_lse) {
        const float got_l = load_as_float(lse.data, DType::float32, lse.offset(h, t));
        if (std::isnan(got_l)) {
          report("LSE is NaN at " + where(t, h));
        } else if (!std::isfinite(ref_l)) {
          if (got_l != ref_l)
            report("LSE must be " + std::to_string(ref_l) + " at " + where(t, h) + ", got " + std::to_string(got_l));
        } else if (!std::isfinite(got_l)) {
          report("LSE is " + std::to_string(got_l) + " at " + where(t, h) + ", the reference " + std::to_string(ref_l));
        } else {
          const double e = std::abs(static_cast<double>(got_l) - ref_l);
          max_lse_error = std::max(max_lse_error, e);
          if (e > tolerance.lse_absolute)
            report("LSE error " + std::to_string(e) + " at " + where(t, h) + " (" + std::to_string(got_l) + " vs " +
                   std::to_string(ref_l) + ")");
        }
      }
      // Rows without keys are exactly zero in the reference and must be here.
      bool ref_row_zero = ref_l == neg_inf;
      for (std::int64_t d = 0; d < dim && ref_row_zero; ++d)
        ref_row_zero = load_as_float(ref_out.data, ref_out.dtype, ref_out.offset(t, h, d)) == 0.0f;
      for (std::int64_t d = 0; d < dim; ++d) {
        const double got = load_as_float(out.data, out.dtype, out.offset(t, h, d));
        const double ref = load_as_float(ref_out.data, ref_out.dtype, ref_out.offset(t, h, d));
        if (std::isnan(got)) {
          report("out is NaN at " + where(t, h, d));
          continue;
        }
        if (ref_row_zero && got != 0.0)
          report("row without keys must be 0, got " + std::to_string(got) + " at " + where(t, h, d));
        error_sq += (got - ref) * (got - ref);
        ref_sq += ref * ref;
      }
    }
  }
  const double relative = ref_sq > 0.0 ? std::sqrt(error_sq / ref_sq) : std::sqrt(error_sq);
  if (!(relative <= tolerance.out_relative)) {
    report("relative norm error " + std::to_string(relative) + " exceeds " + std::to_string(tolerance.out_relative));
  }
  if (problem_count == 0)
    return ::testing::AssertionSuccess() << "relative error " << relative << ", max LSE error " << max_lse_error;
  return ::testing::AssertionFailure() << problem_count << " problem(s) (relative error " << relative
                                       << ", max LSE error " << max_lse_error << "):" << problems.str();
}

std::vector<std::int64_t> offsets_of(const std::vector<int>& lengths) {
  std::vector<std::int64_t> offsets(lengths.size() + 1, 0);
  for (std::size_t i = 0; i < lengths.size(); ++i) offsets[i + 1] = offsets[i] + lengths[i];
  return offsets;
}

}  // namespace mla::testing
