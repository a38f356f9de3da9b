#include "mla/tensor.hpp"

#include <fmt/format.h>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::host:
      return "host";
    case MemoryKind::device:
      return "device";
    case MemoryKind::shared:
      return "shared";
  }
  return "unknown";
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                                  MemoryKind memory) {
  if (shape.size() > static_cast<std::size_t>(max_rank)) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("tensor rank {} exceeds the maximum of {}", shape.size(), max_rank));
  }
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.rank = static_cast<int>(shape.size());
  view.memory = memory;
  int i = 0;
  for (std::int64_t extent : shape) {
    if (extent < 0) raise(ErrorCategory::invalid_argument, fmt::format("negative tensor extent {}", extent));
    view.shape[static_cast<std::size_t>(i++)] = extent;
  }
  std::int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.stride[static_cast<std::size_t>(d)] = stride;
    stride *= view.shape[static_cast<std::size_t>(d)];
  }
  return view;
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[static_cast<std::size_t>(d)];
  return rank == 0 ? 0 : n;
}

bool TensorView::is_contiguous() const {
  std::int64_t expected = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    if (shape[i] != 1 && stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string TensorView::describe() const {
  std::string dims;
  std::string strides;
  for (int d = 0; d < rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    dims += fmt::format("{}{}", d ? ", " : "", shape[i]);
    strides += fmt::format("{}{}", d ? ", " : "", stride[i]);
  }
  return fmt::format("{}[{}] strides [{}] on {}", dtype_name(dtype), dims, strides, memory_kind_name(memory));
}

void check_tensor(const TensorView& view, const char* what, DType dtype, std::initializer_list<std::int64_t> shape) {
  std::string expected;
  int i = 0;
  for (std::int64_t extent : shape)
    expected += fmt::format("{}{}", i++ ? ", " : "", extent < 0 ? std::string("*") : std::to_string(extent));
  const auto fail = [&](const std::string& why) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("{}: {} (expected {}[{}], got {})", what, why, dtype_name(dtype), expected,
                      view.rank == 0 ? std::string("an empty view") : view.describe()));
  };
  if (view.rank != static_cast<int>(shape.size())) fail("wrong rank");
  if (view.dtype != dtype) fail("wrong dtype");
  int d = 0;
  for (std::int64_t extent : shape) {
    if (extent >= 0 && view.shape[static_cast<std::size_t>(d)] != extent)
      fail(fmt::format("wrong size of dimension {}", d));
    ++d;
  }
  if (view.data == nullptr && view.numel() > 0) fail("null data pointer");
}

}  // namespace mla
