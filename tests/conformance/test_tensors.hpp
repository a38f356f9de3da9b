// Test helpers shared by the conformance suite and the REFERENCE tests: host
// tensors with padding and NaN poison, random data rounded to the dtype,
// copies to and from a queue, and the comparison of attention results against
// the reference with docs/contract.md §6 tolerances.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "mla/mla.hpp"

namespace mla::testing {

// Bits of a quiet NaN in `dtype`; every byte of fresh test storage holds it.
std::uint32_t poison_bits(DType dtype);

// Host storage plus a strided view into it. The storage starts poisoned and
// may be larger than the view (padding between rows, extra rows at the end,
// an offset at the start); padding_untouched() checks that nobody wrote there.
class HostTensor {
 public:
  HostTensor() = default;
  // Contiguous when `strides` is empty. `offset` elements precede the view and
  // `extra` elements follow its last one.
  HostTensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {},
             std::int64_t offset = 0, std::int64_t extra = 0);

  const TensorView& view() const { return view_; }
  DType dtype() const { return view_.dtype; }
  std::int64_t size(int dim) const { return view_.size(dim); }
  std::int64_t offset() const { return offset_; }
  std::int64_t storage_elements() const { return storage_elements_; }
  void* storage() { return storage_.data(); }
  const void* storage() const { return storage_.data(); }
  std::size_t storage_bytes() const { return storage_.size(); }

  float at(std::int64_t i0, std::int64_t i1 = 0, std::int64_t i2 = 0) const;
  void set(float value, std::int64_t i0, std::int64_t i1 = 0, std::int64_t i2 = 0);

  // Fills the view with values uniform in [lo, hi], rounded to the dtype and
  // never zero (a zero hides a missing multiply).
  void fill_random(std::mt19937_64& rng, float lo, float hi);
  // Writes poison over the whole storage.
  void poison();

  // Success when every element outside the view still holds poison.
  ::testing::AssertionResult padding_untouched() const;

 private:
  TensorView view_;
  std::vector<std::byte> storage_;
  std::int64_t offset_ = 0;
  std::int64_t storage_elements_ = 0;
};

// A copy of a host tensor's whole storage (padding and poison included) on a
// queue, with the same strides.
struct DeviceTensor {
  UsmBuffer buffer;
  TensorView view;
};
DeviceTensor upload(Queue& queue, const HostTensor& host);
// Copies the device storage back over `host` (both must have the same layout).
void download(Queue& queue, const DeviceTensor& device, HostTensor& host);
// A host copy of any view on `queue` (the span its strides cover), same strides.
HostTensor download(Queue& queue, const TensorView& view);

// An allocator that counts the allocations it serves for another
// (Queue::with_allocator): the witness that a path allocates nothing.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(std::shared_ptr<Allocator> inner) : inner_(std::move(inner)) {}
  void* allocate(std::size_t bytes, MemoryKind kind) override {
    ++allocations_;
    return inner_->allocate(bytes, kind);
  }
  void deallocate(void* ptr, MemoryKind kind) noexcept override { inner_->deallocate(ptr, kind); }
  int allocations() const { return allocations_.load(); }

 private:
  std::shared_ptr<Allocator> inner_;
  std::atomic<int> allocations_{0};
};

// docs/contract.md §6: relative norm error of the output and absolute LSE error.
struct Tolerance {
  double out_relative = 1e-5;
  double lse_absolute = 1e-3;
};
// The bounds for an input dtype (float32, float16, bfloat16); throws
// std::invalid_argument for float8_e4m3, whose inputs are held to their
// output dtype's bounds (§6; Conformance::tolerance).
Tolerance tolerance_for(DType input_dtype);
// fp8 output: one e4m3 step is 1/8 relative; norm error far below that.
inline constexpr double fp8_out_relative = 1e-1;
// float8_e4m3 inputs on a GPU kernel: P is rounded to e4m3 (3 mantissa bits,
// about 2% rms per weight) for the P V product; measured up to 2.5e-2 on the
// conformance data (§6).
inline constexpr double fp8_p_relative = 5e-2;

// Compares an attention / merge result with the reference on the host.
// `lse` may be an empty view (not requested); `ref_lse` is always given and
// marks the rows without keys (-inf), whose LSE must be exactly -inf and whose
// output must be exactly zero where the reference's is. NaN never passes.
::testing::AssertionResult results_match(const TensorView& out, const TensorView& lse, const TensorView& ref_out,
                                         const TensorView& ref_lse, const Tolerance& tolerance);

// Per-sequence lengths -> cu_seqlens-style offsets.
std::vector<std::int64_t> offsets_of(const std::vector<int>& lengths);

}  // namespace mla::testing
