// The tensor map of cuda/sm90_tensor_map.hpp for nvcc: the driver's CUtensorMap.
#pragma once

#include <cuda.h>

namespace mla::cuda_flash::sm90 {
using TensorMap = CUtensorMap;
}  // namespace mla::cuda_flash::sm90
