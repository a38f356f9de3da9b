// Carving a caller's workspace into views, for the steps that take one
// (run_prefill_step, run_mla_prefill): internal to core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "mla/tensor.hpp"

namespace mla::detail {

// Pieces start this many bytes apart (a multiple of every kernel's 16-byte
// vector loads); the workspace itself must be aligned to
// workspace_base_alignment, which the host queue (64) and the GPU runtimes
// (256) give.
inline constexpr std::size_t workspace_alignment = 256;
inline constexpr std::size_t workspace_base_alignment = 64;

// Hands out consecutive aligned pieces of [base, base + size). Over a null
// base it measures instead: pieces are null and used() is what a real carve
// of the same pieces takes, so a step's size function and its carve are one
// piece of code.
class WorkspaceCursor {
 public:
  WorkspaceCursor(void* base, std::size_t size, std::string who);
  static WorkspaceCursor measuring() { return WorkspaceCursor(nullptr, 0, "measure"); }

  void* bytes(std::size_t count);
  // A contiguous view in the queue's device memory.
  TensorView view(DType dtype, std::initializer_list<std::int64_t> shape);
  std::size_t used() const { return used_; }

 private:
  unsigned char* base_;
  std::size_t size_;
  std::string who_;
  std::size_t used_ = 0;
};

// Raises Error(invalid_argument) unless `workspace` holds `needed` bytes
// (`size_function` names where the caller gets the figure) at the base
// alignment.
void check_workspace(const std::string& who, const char* size_function, const void* workspace, std::size_t bytes,
                     std::size_t needed);

}  // namespace mla::detail
