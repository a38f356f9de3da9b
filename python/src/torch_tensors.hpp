// PyTorch tensors seen as mla::TensorView (no copy), and mla::Error as the
// exception PyTorch turns into the matching Python one.
#pragma once

#include <torch/library.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "mla/backend.hpp"
#include "mla/tensor.hpp"

namespace mla::python {

// A view of `tensor` (float32, float16, bfloat16, or uint8 as fp8 e4m3 bytes;
// rank 1 to 4). Raises Error(invalid_argument) naming `what`.
TensorView view_of(const at::Tensor& tensor, const char* what);
// The same, for a tensor that must be on `anchor`'s device (a kernel on one
// GPU cannot read another's memory): raises Error(invalid_argument) naming
// both tensors and devices otherwise.
TensorView view_on(const at::Tensor& tensor, const char* what, const at::Tensor& anchor, const char* anchor_name);

// A top-k mask (docs/contract.md §12) in vLLM's layout: an int32 tensor
// [B, rows, words] on `anchor`'s device with unit last stride, seen in
// place (the library checks the rest against the plan).
TopkMask topk_mask_of(const at::Tensor& tensor, const at::Tensor& anchor, const char* anchor_name);

// A 1-d integer tensor as int32 cu_seqlens on the host (copied from a GPU).
std::vector<std::int32_t> cu_seqlens_of(const at::Tensor& tensor, const char* what);

// Runs `body`, turning mla::Error into PyTorch's errors: ValueError for bad
// input (arguments, configuration, names, selection), NotImplementedError
// for what this build cannot do, RuntimeError otherwise; the message is the
// library's.
void translate_errors(const std::function<void()>& body);

}  // namespace mla::python
