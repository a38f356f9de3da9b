// The <<<>>> launch of the HIP_FLASH kernel and its launch error, named after
// the instantiation. Included only by flash_instantiate.hpp.
#pragma once

#include <string>

#include "cuda_hip/gpu_runtime.hpp"
#include "flash_instances.hpp"
#include "flash_kernel.hpp"

namespace mla::hip_flash {

template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family>
void launch_flash_forward(const FlashParams& params, gpu::Stream stream) {
  constexpr FlashTileConfig c = flash_tile_config<HeadDimQk, HeadDimV, Family>();
  if (params.num_work == 0 || params.num_heads == 0) return;
  const dim3 grid(static_cast<unsigned>(params.num_work), static_cast<unsigned>(params.num_heads),
                  static_cast<unsigned>(params.num_splits));
  flash_forward_kernel<D, HeadDimQk, HeadDimV, Family><<<grid, c.threads(), 0, stream>>>(params);
  gpu::check_launch("hip_flash_forward<" + std::string(dtype_name(D)) + ", " + std::to_string(HeadDimQk) + ", " +
                        std::to_string(HeadDimV) + ", " + tile_family_name(Family) + ">",
                    std::to_string(params.num_work) + " work items, " + std::to_string(params.num_heads) + " heads");
}

}  // namespace mla::hip_flash
