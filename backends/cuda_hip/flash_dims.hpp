// The MLA dims both GPU flash backends serve, from flash_shapes.def (HIP_FLASH
// promises the same shapes as CUDA_FLASH).
#pragma once

#include "mla/dims.hpp"

namespace mla::gpu {

inline constexpr MlaDims flash_dims[] = {
#define MLA_FLASH_SHAPE(nope, rope, v) MlaDims{nope, rope, v},
#include "flash_shapes.def"
#undef MLA_FLASH_SHAPE
};

}  // namespace mla::gpu
