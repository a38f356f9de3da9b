#include "core/workspace.hpp"

#include <utility>

#include "mla/error.hpp"

namespace mla::detail {

WorkspaceCursor::WorkspaceCursor(void* base, std::size_t size, std::string who)
    : base_(static_cast<unsigned char*>(base)), size_(size), who_(std::move(who)) {}

void* WorkspaceCursor::bytes(std::size_t count) {
  const std::size_t start = used_;
  used_ += (count + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
  if (base_ == nullptr) return nullptr;
  if (used_ > size_) {
    raise(ErrorCategory::internal, who_ + ": workspace of " + std::to_string(size_) +
                                       " bytes overrun; its size function disagrees with the step");
  }
  return count == 0 ? nullptr : base_ + start;
}

TensorView WorkspaceCursor::view(DType dtype, std::initializer_list<std::int64_t> shape) {
  std::size_t elements = 1;
  for (std::int64_t extent : shape) elements *= static_cast<std::size_t>(extent);
  return TensorView::contiguous(bytes(elements * dtype_size(dtype)), dtype, shape, MemoryKind::device);
}

void check_workspace(const std::string& who, const char* size_function, const void* workspace, std::size_t bytes,
                     std::size_t needed) {
  if (bytes < needed || (needed > 0 && workspace == nullptr)) {
    raise(ErrorCategory::invalid_argument, who + ": the step needs " + std::to_string(needed) +
                                               " bytes of workspace (" + size_function + "); got " +
                                               std::to_string(bytes));
  }
  if (reinterpret_cast<std::uintptr_t>(workspace) % workspace_base_alignment != 0) {
    raise(ErrorCategory::invalid_argument,
          who + ": the workspace must be " + std::to_string(workspace_base_alignment) + "-byte aligned");
  }
}

}  // namespace mla::detail
