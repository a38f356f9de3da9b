// HOPPER_FLASH's backend: its kernel chooser and the runtime dispatch to the
// compiled instantiations (hopper_launch.cuh) in the GPU backend class
// CUDA_FLASH and HIP_FLASH share, with CUDA_FLASH's merge, gather and
// up-projection kernels.
#include "hopper_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "cuda_hip/latents.hpp"
#include "cuda_hip/merge_attn_states.hpp"
#include "cuda_hip/split_merge_kernel.hpp"
#include "hopper_config.hpp"
#include "hopper_launch.cuh"
#include "mla/error.hpp"
#include "projection.hpp"

namespace mla::hopper_flash {
namespace {

template <class T, int HeadDimQk, int HeadDimV, bool KeyMask>
void launch_causal_or_not(const FlashParams& params, gpu::Stream stream, const LaunchDevice& device) {
  if (params.e4m3_inputs) {
    if (params.causal)
      return launch_hopper_forward<T, HeadDimQk, HeadDimV, true, __nv_fp8_e4m3, KeyMask>(params, stream, device);
    return launch_hopper_forward<T, HeadDimQk, HeadDimV, false, __nv_fp8_e4m3, KeyMask>(params, stream, device);
  }
  if (params.causal) {
    launch_hopper_forward<T, HeadDimQk, HeadDimV, true, T, KeyMask>(params, stream, device);
  } else {
    launch_hopper_forward<T, HeadDimQk, HeadDimV, false, T, KeyMask>(params, stream, device);
  }
}

// docs/contract.md §12: a launch with a top-k mask or window runs the
// instantiations that read it.
template <class T, int HeadDimQk, int HeadDimV>
void launch_masked_or_not(const FlashParams& params, gpu::Stream stream, const LaunchDevice& device) {
  if (params.mask.masks_keys()) return launch_causal_or_not<T, HeadDimQk, HeadDimV, true>(params, stream, device);
  launch_causal_or_not<T, HeadDimQk, HeadDimV, false>(params, stream, device);
}

// T: the output type (and the inputs', unless params.e4m3_inputs).
template <class T>
void launch_for_dims(const FlashParams& params, int head_dim_qk, int head_dim_v, gpu::Stream stream,
                     const LaunchDevice& device) {
#define MLA_FLASH_SHAPE(nope, rope, v)                     \
  if (head_dim_qk == (nope) + (rope) && head_dim_v == (v)) \
    return launch_masked_or_not<T, (nope) + (rope), (v)>(params, stream, device);
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
  raise(ErrorCategory::internal, "HOPPER_FLASH: head dims " + std::to_string(head_dim_qk) + "/" +
                                     std::to_string(head_dim_v) + " have a tile configuration but no kernel");
}

// MLA_HOPPER_HEAD_GROUP=n caps the heads per L2 group at n instead of sizing
// the groups from the L2: a tuning knob for benchmarks. Unset or empty: 0.
int head_group_override() { return gpu::whole_number_setting("MLA_HOPPER_HEAD_GROUP", 1024); }

// The pool the launches' tile counters come from, one per device, made on
// first use and kept for the process. Not the device's default pool: that
// one gives its memory back at every synchronization (release threshold 0)
// and maps it again at the next allocation, tens of microseconds in front of
// a kernel that may itself take 40; this one keeps what it has, and the
// application's pools stay as it set them.
cudaMemPool_t counter_pool(int device) {
  static std::mutex mutex;
  static std::map<int, cudaMemPool_t> pools;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = pools.find(device);
  if (found != pools.end()) return found->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  const std::string context = "HOPPER_FLASH's tile-counter pool on device " + std::to_string(device);
  gpu::check(cudaMemPoolCreate(&pool, &props), "MemPoolCreate", context);
  std::uint64_t keep_everything = UINT64_MAX;
  const cudaError_t set = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything);
  if (set != cudaSuccess) {
    (void)cudaMemPoolDestroy(pool);
    gpu::check(set, "MemPoolSetAttribute", context);
  }
  pools.emplace(device, pool);
  return pool;
}

// Enqueues the attention with the kernel `kernel` names (the answer of
// choose_kernel for the queue's device) on `queue`'s stream: the vendor
// table's launch. Host work only besides the launch: the tensor
// maps are encoded on the host and passed by value, nothing is waited for,
// and under stream capture the tile counter comes from the graph, so the
// call can be captured into a CUDA graph. Raises Error(invalid_argument) for
// a layout no tensor map describes, and Error(device) naming the kernel when
// the launch fails.
void launch_hopper_flash(Queue& queue, const FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  gpu::DeviceGuard guard(queue.device_index());
  const gpu::Stream stream = gpu::stream_of(queue);
  LaunchDevice device{queue.capability().shared_memory_per_block, queue.capability().multiprocessors};
  int l2_bytes = 0;
  gpu::check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, queue.device_index()), "DeviceGetAttribute",
             "the L2 size of device " + std::to_string(queue.device_index()));
  device.l2_bytes = static_cast<std::size_t>(std::max(l2_bytes, 0));
  device.max_head_group = head_group_override();
  // A pool cannot be made while the stream is captured (nor anything else
  // allocated outside the graph): the counter then comes from the graph.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  gpu::check(cudaStreamIsCapturing(stream, &capture), "StreamIsCapturing", "HOPPER_FLASH's launch");
  device.counter_pool = capture == cudaStreamCaptureStatusNone ? counter_pool(queue.device_index()) : nullptr;
  if (dtype == DType::bfloat16) {
    launch_for_dims<__nv_bfloat16>(params, kernel.head_dim_qk, kernel.head_dim_v, stream, device);
  } else {
    launch_for_dims<__half>(params, kernel.head_dim_qk, kernel.head_dim_v, stream, device);
  }
  // Split-KV: the kernel wrote float32 partials per key range; fold them
  // into out and lse (the shared merge of CUDA_FLASH and HIP_FLASH).
  if (params.num_splits > 1) {
    cuda::split_merge::merge_splits_with(
        params, dtype, kernel.head_dim_v,
        [stream](auto merge, const cuda::merge_kernel::MergeLaunch& how, const gpu::FlashParams& p, std::int64_t dim) {
          merge<<<how.blocks, how.threads, 0, stream>>>(p, dim);
          gpu::check_launch(how.name, how.context);
        });
  }
}

constexpr gpu::FlashVendor hopper_vendor{
    "HOPPER_FLASH",
    queue_kind,
    choose_kernel,
    launch_hopper_flash,
    cuda::merge_attn_states,
    cuda::gather_latents,
    cuda_flash::project_latents,
    cuda_flash::make_projector,
    true,
    cuda::quantise_e4m3,
    true,
};

}  // namespace

std::unique_ptr<PrefillBackend> make_hopper_flash_backend(const BackendParams& params) {
  return std::make_unique<gpu::GpuFlashBackend>(params, hopper_vendor);
}

}  // namespace mla::hopper_flash
