// A non-owning view of a strided tensor of up to four dimensions.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "mla/dtype.hpp"

namespace mla {

// Where a pointer's memory lives, in USM terms.
enum class MemoryKind {
  host,    // ordinary host memory, or memory from Queue::malloc_host
  device,  // memory from Queue::malloc_device (on a host queue this is host memory too)
  shared,  // memory from Queue::malloc_shared, visible to host and device
};

std::string_view memory_kind_name(MemoryKind kind);

struct TensorView {
  static constexpr int max_rank = 4;

  void* data = nullptr;
  DType dtype = DType::float32;
  int rank = 0;
  std::array<std::int64_t, max_rank> shape{};
  std::array<std::int64_t, max_rank> stride{};  // in elements, not bytes
  MemoryKind memory = MemoryKind::host;

  // A row-major contiguous view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               MemoryKind memory = MemoryKind::host);

  bool empty_view() const { return data == nullptr && rank == 0; }
  std::int64_t numel() const;
  std::int64_t size(int dim) const { return shape.at(static_cast<std::size_t>(dim)); }
  bool is_contiguous() const;

  // Element offset of an index (no bounds check).
  std::int64_t offset(std::int64_t i0, std::int64_t i1 = 0, std::int64_t i2 = 0, std::int64_t i3 = 0) const {
    return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
  }

  // "bfloat16[7, 16, 192] strides [3072, 192, 1] on device"
  std::string describe() const;
};

// Raises Error(invalid_argument) naming `what` unless `view` has the given rank,
// dtype and shape (a shape entry of -1 matches any size).
void check_tensor(const TensorView& view, const char* what, DType dtype, std::initializer_list<std::int64_t> shape);

}  // namespace mla
