// make_tensor_map on the GPU: cuTensorMapEncodeTiled, found through the CUDA
// runtime's driver entry point so the library does not link the driver library.
#include "cuda/sm90_tensor_map.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/sm90_tensor_map_check.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash::sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // The 12.0 version of the symbol: the signature this file is written against.
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found);
  if (status != cudaSuccess) {
    raise(ErrorCategory::device,
          std::string("make_tensor_map: cudaGetDriverEntryPointByVersion failed: ") + cudaGetErrorString(status));
  }
  if (found != cudaDriverEntryPointSuccess || function == nullptr) {
    raise(ErrorCategory::not_supported,
          "make_tensor_map: the CUDA driver has no cuTensorMapEncodeTiled (a driver for CUDA 12.0 or newer is needed)");
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
}

CUtensorMapDataType data_type(int element_bytes) {
  switch (element_bytes) {
    case 1:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case 2:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case 4:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    default:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
  }
}

CUtensorMapSwizzle driver_swizzle(Swizzle swizzle) {
  switch (swizzle) {
    case Swizzle::bytes32:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case Swizzle::bytes64:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case Swizzle::bytes128:
      return CU_TENSOR_MAP_SWIZZLE_128B;
    case Swizzle::none:
      break;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

}  // namespace

TensorMap make_tensor_map(const TensorMapSpec& spec) {
  check_tensor_map_spec(spec);
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_function();
  cuuint64_t dims[5] = {};
  cuuint64_t strides[4] = {};
  cuuint32_t box[5] = {};
  cuuint32_t element_strides[5] = {};
  for (int i = 0; i < spec.rank; ++i) {
    dims[i] = spec.dims[i];
    box[i] = spec.box[i];
    element_strides[i] = 1;
    if (i + 1 < spec.rank) strides[i] = spec.strides_bytes[i];
  }
  TensorMap map{};
  // FLOAT_OOB_FILL_NONE: elements outside the tensor read as zero.
  const CUresult result =
      encode(&map, data_type(spec.element_bytes), static_cast<cuuint32_t>(spec.rank), const_cast<void*>(spec.base),
             dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, driver_swizzle(spec.swizzle),
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    raise(ErrorCategory::device, "make_tensor_map: cuTensorMapEncodeTiled failed with CUresult " +
                                     std::to_string(static_cast<int>(result)) + " (rank " + std::to_string(spec.rank) +
                                     ", box " + std::to_string(spec.box[0]) + " x " + std::to_string(spec.box[1]) +
                                     ", swizzle " + std::to_string(swizzle_bytes(spec.swizzle)) + " B)");
  }
  return map;
}

}  // namespace mla::cuda_flash::sm90
