// The explicit instantiations of one (qk head dim, v head dim) pair: bf16 and
// fp16, causal and non-causal. CMake generates one hopper_dqk<QK>_dv<V>.cu per
// pair of cuda_hip/flash_shapes.def that defines MLA_FLASH_QK and MLA_FLASH_V
// and includes this.
#pragma once

#if !defined(MLA_FLASH_QK) || !defined(MLA_FLASH_V)
#error "define MLA_FLASH_QK and MLA_FLASH_V before including hopper_instantiate.cuh"
#endif

#include "hopper_instances.hpp"
#include "hopper_kernel_launch.cuh"

namespace mla::hopper_flash {

template void launch_hopper_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream,
                                                                                    const LaunchDevice&);
template void launch_hopper_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream,
                                                                                     const LaunchDevice&);
template void launch_hopper_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream,
                                                                             const LaunchDevice&);
template void launch_hopper_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream,
                                                                              const LaunchDevice&);

}  // namespace mla::hopper_flash
