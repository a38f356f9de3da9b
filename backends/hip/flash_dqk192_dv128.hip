// Instantiations for qk head dim 192, v head dim 128: bf16 and fp16. One file per
// head-dim pair so a parallel build compiles them side by side.
#include "flash_kernel_launch.hpp"

namespace mla::hip_flash {

template void launch_flash_forward<DType::bfloat16, 192, 128>(const FlashParams&, gpu::Stream);
template void launch_flash_forward<DType::float16, 192, 128>(const FlashParams&, gpu::Stream);

}  // namespace mla::hip_flash
