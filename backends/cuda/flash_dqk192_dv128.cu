// Instantiations for qk head dim 192, v head dim 128: bf16 and fp16, causal and
// non-causal. One file per head-dim pair so a parallel build compiles them side by side.
#include "flash_instances.hpp"
#include "flash_kernel_launch.cuh"

namespace mla::cuda_flash {

template void launch_flash_forward<__nv_bfloat16, 192, 128, true>(const FlashParams&, gpu::Stream, std::size_t);
template void launch_flash_forward<__nv_bfloat16, 192, 128, false>(const FlashParams&, gpu::Stream, std::size_t);
template void launch_flash_forward<__half, 192, 128, true>(const FlashParams&, gpu::Stream, std::size_t);
template void launch_flash_forward<__half, 192, 128, false>(const FlashParams&, gpu::Stream, std::size_t);

}  // namespace mla::cuda_flash
