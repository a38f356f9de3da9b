// The MLA dims (from flash_shapes.def) and the 16-bit input dtypes every GPU
// flash backend serves; CUDA_FLASH and HIP_FLASH also take float8_e4m3 inputs
// on some devices (flash_e4m3_dtypes: sm_89 and sm_120+; gfx940-942).
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

// CUDA_FLASH's and HIP_FLASH's: the 16-bit ones and e4m3 inputs.
inline constexpr DType flash_e4m3_dtypes[] = {DType::float16, DType::bfloat16, DType::float8_e4m3};

constexpr bool is_flash_dtype(DType dtype, bool e4m3_inputs = false) {
  for (DType served : flash_dtypes) {
    if (served == dtype) return true;
  }
  return e4m3_inputs && dtype == DType::float8_e4m3;
}

}  // namespace mla::gpu
