// Tensors of the caller's (NumPy arrays, PyTorch tensors, anything that speaks
// DLPack) seen as mla::TensorView without a copy.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "mla/backend.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::python {

namespace py = pybind11;

// A view of a Python object's memory. `capsule` keeps the producer's buffer
// alive (and its deleter pending) for as long as the view is in use.
struct BorrowedTensor {
  TensorView view;
  py::object capsule;
  int device_type = 1;  // DLDeviceType; 1 is the host (kDLCPU)
  int device_id = 0;
};

// Imports `object` for argument `what`: anything with __dlpack__, or a
// "dltensor" capsule. Element types: float32, float16, bfloat16, and uint8
// read as fp8 e4m3 bytes. `stream` is passed to __dlpack__ when it is not
// None (the stream a GPU queue will read on). The tensor must live where
// `queue` can read it: host memory for a host queue, the same GPU for a GPU
// queue. Raises Error(invalid_argument) naming `what`.
BorrowedTensor borrow_tensor(py::handle object, const char* what, const Queue& queue, py::handle stream);

// A bit-packed top-k mask (docs/contract.md §12): an int32 or uint32 tensor
// [B, rows, words] with unit last stride, as vLLM builds it. `capsule`
// keeps it alive.
struct BorrowedMask {
  TopkMask mask;
  py::object capsule;
};
BorrowedMask borrow_topk_mask(py::handle object, const char* what, const Queue& queue, py::handle stream);

// The same for an optional argument: None gives nullopt.
std::optional<BorrowedTensor> borrow_optional(py::handle object, const char* what, const Queue& queue,
                                              py::handle stream);

}  // namespace mla::python
