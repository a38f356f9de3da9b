#include "tensors.hpp"

#include <dlpack/dlpack.h>

#include <string>
#include <utility>

#include "mla/error.hpp"

namespace mla::python {
namespace {

std::string type_name(py::handle object) { return py::str(py::type::of(object).attr("__name__")); }

DType dtype_of(const DLDataType& type, const char* what) {
  if (type.lanes == 1) {
    if (type.code == kDLFloat && type.bits == 32) return DType::float32;
    if (type.code == kDLFloat && type.bits == 16) return DType::float16;
    if (type.code == kDLBfloat && type.bits == 16) return DType::bfloat16;
    // PyTorch 1.x and NumPy have no fp8 type: fp8 e4m3 travels as its bytes.
    if (type.code == kDLUInt && type.bits == 8) return DType::float8_e4m3;
  }
  raise(ErrorCategory::invalid_argument,
        std::string(what) + ": element type (DLPack code " + std::to_string(type.code) + ", " +
            std::to_string(type.bits) + " bits, " + std::to_string(type.lanes) +
            " lanes) is not supported; use float32, float16, bfloat16, or uint8 for fp8 e4m3 bytes");
}

std::string device_text(int type, int id) {
  switch (type) {
    case kDLCPU:
      return "cpu";
    case kDLCUDA:
      return "cuda:" + std::to_string(id);
    case kDLCUDAHost:
      return "pinned host memory";
    case kDLCUDAManaged:
      return "cuda managed memory";
    case kDLROCM:
      return "rocm:" + std::to_string(id);
    case kDLROCMHost:
      return "pinned host memory (ROCm)";
    default:
      return "DLPack device type " + std::to_string(type);
  }
}

// Where the memory is for the library, or an error when `queue` cannot read it.
MemoryKind memory_for(const DLDevice& device, const char* what, const Queue& queue) {
  const std::string where = std::string(what) + " is on " + device_text(device.device_type, device.device_id);
  if (device.device_type == kDLCPU || device.device_type == kDLCUDAHost || device.device_type == kDLROCMHost) {
    return MemoryKind::host;  // a GPU queue refuses it later, with the backend's words
  }
  const bool cuda_memory = device.device_type == kDLCUDA || device.device_type == kDLCUDAManaged;
  const bool hip_memory = device.device_type == kDLROCM;
  if (!cuda_memory && !hip_memory) {
    raise(ErrorCategory::invalid_argument, where + ", which this library cannot read");
  }
  const DeviceBackend needed = cuda_memory ? DeviceBackend::cuda : DeviceBackend::hip;
  if (queue.backend() != needed) {
    raise(ErrorCategory::invalid_argument, where + " but the backend runs on a " +
                                               std::string(device_backend_name(queue.backend())) + " queue (" +
                                               queue.describe() + ")");
  }
  if (device.device_id != queue.device_index()) {
    raise(ErrorCategory::invalid_argument,
          where + " but the backend's queue is on device " + std::to_string(queue.device_index()));
  }
  return device.device_type == kDLCUDAManaged ? MemoryKind::shared : MemoryKind::device;
}

py::object capsule_of(py::handle object, const char* what, py::handle stream) {
  if (PyCapsule_CheckExact(object.ptr())) return py::reinterpret_borrow<py::object>(object);
  if (!py::hasattr(object, "__dlpack__")) {
    raise(ErrorCategory::invalid_argument, std::string(what) + " must be a tensor that supports DLPack (a NumPy " +
                                               "array or a PyTorch tensor), got " + type_name(object));
  }
  py::object export_tensor = object.attr("__dlpack__");
  if (stream.is_none()) return export_tensor();
  // A stream means something only to a GPU array; a host one (NumPy, a CPU
  // tensor) refuses it, and is then refused below with the library's message.
  if (py::hasattr(object, "__dlpack_device__")) {
    const auto device = object.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    if (device.first == kDLCPU) return export_tensor();
  }
  return export_tensor(py::arg("stream") = stream);
}

// The DLTensor behind `object`, its capsule kept in `capsule`.
const DLTensor& import_tensor(py::handle object, const char* what, py::handle stream, py::object& capsule) {
  if (object.is_none()) raise(ErrorCategory::invalid_argument, std::string(what) + " is required, got None");
  capsule = capsule_of(object, what, stream);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    raise(ErrorCategory::invalid_argument,
          std::string(what) + ": __dlpack__ did not return an unused \"dltensor\" capsule");
  }
  return managed->dl_tensor;
}

}  // namespace

BorrowedTensor borrow_tensor(py::handle object, const char* what, const Queue& queue, py::handle stream) {
  BorrowedTensor tensor;
  const DLTensor& dl = import_tensor(object, what, stream, tensor.capsule);
  if (dl.ndim < 1 || dl.ndim > TensorView::max_rank) {
    raise(ErrorCategory::invalid_argument, std::string(what) + " has rank " + std::to_string(dl.ndim) +
                                               "; tensors of rank 1 to " + std::to_string(TensorView::max_rank) +
                                               " are accepted");
  }
  TensorView& view = tensor.view;
  view.dtype = dtype_of(dl.dtype, what);
  view.memory = memory_for(dl.device, what, queue);
  view.rank = dl.ndim;
  std::int64_t contiguous_stride = 1;
  for (int d = dl.ndim - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    view.shape[i] = dl.shape[d];
    view.stride[i] = dl.strides != nullptr ? dl.strides[d] : contiguous_stride;
    contiguous_stride *= dl.shape[d];
    if (view.stride[i] < 0) {
      raise(ErrorCategory::invalid_argument,
            std::string(what) + " has a negative stride in dimension " + std::to_string(d) + "; pass a copy");
    }
  }
  view.data = static_cast<char*>(dl.data) + dl.byte_offset;
  tensor.device_type = dl.device.device_type;
  tensor.device_id = dl.device.device_id;
  return tensor;
}

BorrowedMask borrow_topk_mask(py::handle object, const char* what, const Queue& queue, py::handle stream) {
  BorrowedMask borrowed;
  const DLTensor& dl = import_tensor(object, what, stream, borrowed.capsule);
  const bool words =
      dl.dtype.lanes == 1 && dl.dtype.bits == 32 && (dl.dtype.code == kDLInt || dl.dtype.code == kDLUInt);
  if (!words || dl.ndim != 3) {
    raise(ErrorCategory::invalid_argument,
          std::string(what) + " must be an int32 or uint32 tensor [batch, rows, words] (vLLM's bit-packed mask); got " +
              std::to_string(dl.ndim) + " dimensions of DLPack code " + std::to_string(dl.dtype.code) + ", " +
              std::to_string(dl.dtype.bits) + " bits");
  }
  const std::int64_t row_stride = dl.strides != nullptr ? dl.strides[1] : dl.shape[2];
  const std::int64_t batch_stride = dl.strides != nullptr ? dl.strides[0] : dl.shape[1] * dl.shape[2];
  if (dl.strides != nullptr && dl.strides[2] != 1 && dl.shape[2] > 1) {
    raise(ErrorCategory::invalid_argument, std::string(what) + " must have unit stride along its words; pass a copy");
  }
  TopkMask& mask = borrowed.mask;
  mask.words = reinterpret_cast<const std::uint32_t*>(static_cast<const char*>(dl.data) + dl.byte_offset);
  mask.batch_size = dl.shape[0];
  mask.rows = dl.shape[1];
  mask.words_per_row = dl.shape[2];
  mask.batch_stride = batch_stride;
  mask.row_stride = row_stride;
  mask.memory = memory_for(dl.device, what, queue);
  return borrowed;
}

std::optional<BorrowedTensor> borrow_optional(py::handle object, const char* what, const Queue& queue,
                                              py::handle stream) {
  if (object.is_none()) return std::nullopt;
  return borrow_tensor(object, what, queue, stream);
}

}  // namespace mla::python
