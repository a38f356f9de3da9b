// The CUDA / HIP launch of the LSE merge kernel (merge_attn_states_kernel.hpp).
#include "gpu_runtime.hpp"
#include "merge_attn_states.hpp"
#include "merge_attn_states_kernel.hpp"

namespace mla::MLA_GPU_NAMESPACE {

void merge_attn_states(Queue& queue, const MergeArgs& args) {
  merge_kernel::merge_attn_states_with(
      args, [&queue](auto kernel, const merge_kernel::MergeLaunch& how, const merge_kernel::MergeKernelParams& params) {
        gpu::DeviceGuard guard(queue.device_index());
        kernel<<<how.blocks, how.threads, 0, gpu::stream_of(queue)>>>(params);
        gpu::check_launch(how.name, how.context);
      });
}

}  // namespace mla::MLA_GPU_NAMESPACE
