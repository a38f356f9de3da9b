// The MLA dims (from flash_shapes.def) and the input dtypes both GPU flash
// backends serve: HIP_FLASH promises what CUDA_FLASH does.
#pragma once

#include "mla/tensor.hpp"

namespace mla::gpu {

inline constexpr MlaDims flash_dims[] = {
#define MLA_FLASH_SHAPE(nope, rope, v) MlaDims{nope, rope, v},
#include "flash_shapes.def"
#undef MLA_FLASH_SHAPE
};

// The kernels are instantiated for these; float32 stays on the host backends.
inline constexpr DType flash_dtypes[] = {DType::float16, DType::bfloat16};

constexpr bool is_flash_dtype(DType dtype) {
  for (DType served : flash_dtypes) {
    if (served == dtype) return true;
  }
  return false;
}

}  // namespace mla::gpu
