#include "torch_tensors.hpp"

#include <torch/version.h>

#include <limits>
#include <string>

#include "mla/error.hpp"

namespace mla::python {
namespace {

DType dtype_of(const at::Tensor& tensor, const char* what) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return DType::float32;
    case at::kHalf:
      return DType::float16;
    case at::kBFloat16:
      return DType::bfloat16;
    case at::kByte:
      return DType::float8_e4m3;  // PyTorch 1.x carries fp8 as its bytes
#if TORCH_VERSION_MAJOR >= 2
    case at::ScalarType::Float8_e4m3fn:
      return DType::float8_e4m3;
#endif
    default:
      raise(ErrorCategory::invalid_argument, std::string(what) + " has element type " +
                                                 std::string(c10::toString(tensor.scalar_type())) +
                                                 "; use float32, float16, bfloat16, or uint8 for fp8 e4m3 bytes");
  }
}

}  // namespace

TensorView view_of(const at::Tensor& tensor, const char* what) {
  if (!tensor.defined()) raise(ErrorCategory::invalid_argument, std::string(what) + " is an undefined tensor");
  const auto rank = tensor.dim();
  if (rank < 1 || rank > TensorView::max_rank) {
    raise(ErrorCategory::invalid_argument,
          std::string(what) + " has rank " + std::to_string(rank) + "; tensors of rank 1 to 4 are accepted");
  }
  TensorView view;
  view.dtype = dtype_of(tensor, what);
  view.rank = static_cast<int>(rank);
  for (int d = 0; d < view.rank; ++d) {
    view.shape[static_cast<std::size_t>(d)] = tensor.size(d);
    view.stride[static_cast<std::size_t>(d)] = tensor.stride(d);
  }
  view.data = tensor.data_ptr();
  view.memory = tensor.is_cpu() ? MemoryKind::host : MemoryKind::device;
  return view;
}

TensorView view_on(const at::Tensor& tensor, const char* what, const at::Tensor& anchor, const char* anchor_name) {
  if (tensor.defined() && anchor.defined() && tensor.device() != anchor.device()) {
    raise(ErrorCategory::invalid_argument, std::string(what) + " is on " + tensor.device().str() + " but " +
                                               anchor_name + " on " + anchor.device().str() +
                                               "; every tensor of a call must be on one device");
  }
  return view_of(tensor, what);
}

TopkMask topk_mask_of(const at::Tensor& tensor, const at::Tensor& anchor, const char* anchor_name) {
  if (!tensor.defined()) raise(ErrorCategory::invalid_argument, "topk_mask is an undefined tensor");
  if (tensor.scalar_type() != at::kInt || tensor.dim() != 3 || (tensor.numel() > 0 && tensor.stride(2) != 1)) {
    raise(ErrorCategory::invalid_argument,
          "topk_mask must be an int32 tensor [B, rows, words] with unit last stride (vLLM's bit-packed rows); got " +
              std::string(c10::toString(tensor.scalar_type())) + " of rank " + std::to_string(tensor.dim()));
  }
  if (anchor.defined() && tensor.device() != anchor.device()) {
    raise(ErrorCategory::invalid_argument, "topk_mask is on " + tensor.device().str() + " but " + anchor_name + " on " +
                                               anchor.device().str() +
                                               "; every tensor of a call must be on one device");
  }
  TopkMask mask;
  mask.words = static_cast<const std::uint32_t*>(tensor.data_ptr());
  mask.batch_size = tensor.size(0);
  mask.rows = tensor.size(1);
  mask.words_per_row = tensor.size(2);
  mask.batch_stride = tensor.stride(0);
  mask.row_stride = tensor.stride(1);
  mask.memory = tensor.is_cpu() ? MemoryKind::host : MemoryKind::device;
  return mask;
}

std::vector<std::int32_t> cu_seqlens_of(const at::Tensor& tensor, const char* what) {
  if (tensor.dim() != 1 || at::isFloatingType(tensor.scalar_type()) || tensor.scalar_type() == at::kBool) {
    raise(ErrorCategory::invalid_argument, std::string(what) + " must be a 1-d integer tensor");
  }
  const at::Tensor host = tensor.to(at::kCPU, at::kLong).contiguous();
  const std::int64_t* values = host.data_ptr<std::int64_t>();
  std::vector<std::int32_t> cu;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    if (values[i] < 0 || values[i] > std::numeric_limits<std::int32_t>::max()) {
      raise(ErrorCategory::invalid_argument,
            std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(values[i]) + " is outside 0..2^31-1");
    }
    cu.push_back(static_cast<std::int32_t>(values[i]));
  }
  return cu;
}

void translate_errors(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    const ErrorCategory category = error.category();
    const bool bad_input = category == ErrorCategory::invalid_argument || category == ErrorCategory::config ||
                           category == ErrorCategory::not_found || category == ErrorCategory::selection;
    TORCH_CHECK_VALUE(!bad_input, error.what());
    TORCH_CHECK_NOT_IMPLEMENTED(category != ErrorCategory::not_supported, error.what());
    TORCH_CHECK(false, error.what());
  }
}

}  // namespace mla::python
