// The CUDA launch of the HOPPER_FLASH kernel, top to bottom: what the
// launch needs of the device, the tile counter, the <<<>>> launch of one
// instantiation from its recipe (hopper_launch.hpp), the compiled
// instantiations (four per (qk, v) pair of cuda_hip/flash_shapes.def: bf16 /
// fp16 x causal / non-causal) and the runtime dispatch to them. CMake
// generates one hopper_dqk<QK>_dv<V>.cu per pair that defines MLA_FLASH_QK
// and MLA_FLASH_V and includes this header, which then defines that pair's
// instantiations (the last block); hopper_backend.cu includes it for the
// dispatch. CUDA only: the emulator (tests/support/simt) starts the blocks of
// the same recipe itself.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "cuda_hip/env_setting.hpp"
#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "cuda_hip/kernel_choice.hpp"
#include "cuda_hip/split_merge_kernel.hpp"
#include "hopper_kernel.cuh"
#include "hopper_launch.hpp"
#include "mla/error.hpp"
#include "mla/queue.hpp"

namespace mla::hopper_flash {

using gpu::FlashParams;

// What the launcher needs of the device.
struct LaunchDevice {
  std::size_t shared_limit = 0;          // opt-in shared memory per block
  int multiprocessors = 0;               // the persistent grid's size
  std::size_t l2_bytes = 0;              // sizes the head groups; 0: unknown
  int max_head_group = 0;                // > 0: MLA_HOPPER_HEAD_GROUP's override of the L2 sizing
  cudaMemPool_t counter_pool = nullptr;  // the tile counter's; null under stream capture
};

// --- One instantiation's launch ---

// One int from `pool` (detail::counter_pool: the library's own, never
// trimmed, so that a steady stream of launches maps no memory), zeroed on
// `stream`, freed on `stream` after whatever the stream runs in between.
// Without a pool (the stream is being captured) it comes from
// cudaMallocAsync: the graph records an allocation node and owns that memory.
class TileCounter {
 public:
  TileCounter(cudaMemPool_t pool, gpu::Stream stream, const std::string& kernel) : stream_(stream) {
    const std::string context = kernel + ": the tile counter";
    void** where = reinterpret_cast<void**>(&counter_);
    if (pool == nullptr) {
      gpu::check(cudaMallocAsync(where, sizeof(int), stream), "MallocAsync", context);
    } else {
      gpu::check(cudaMallocFromPoolAsync(where, sizeof(int), pool, stream), "MallocFromPoolAsync", context);
    }
    const cudaError_t zeroed = cudaMemsetAsync(counter_, 0, sizeof(int), stream);
    if (zeroed != cudaSuccess) {
      (void)cudaFreeAsync(counter_, stream_);
      gpu::check(zeroed, "MemsetAsync", context);
    }
  }
  ~TileCounter() { gpu::quietly(cudaFreeAsync(counter_, stream_), "FreeAsync (HOPPER_FLASH's tile counter)"); }
  TileCounter(const TileCounter&) = delete;
  TileCounter& operator=(const TileCounter&) = delete;
  int* get() const { return counter_; }

 private:
  gpu::Stream stream_;
  int* counter_ = nullptr;
};

template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void launch_hopper_forward(const FlashParams& params, gpu::Stream stream, const LaunchDevice& device) {
  constexpr DType dtype = cuda_flash::element_dtype<T>;
  const int max_group = device.max_head_group > 0
                            ? device.max_head_group
                            : l2_max_head_group(device.l2_bytes, params.k_tokens, HeadDimQk, HeadDimV);
  HopperLaunch launch =
      plan_hopper_launch<HeadDimQk, HeadDimV, Causal>(params, dtype, device.multiprocessors, max_group);
  if (launch.grid.blocks == 0) return;
  if (launch.shared_bytes > device.shared_limit) {
    raise(ErrorCategory::not_supported, launch.kernel + " needs " + std::to_string(launch.shared_bytes) +
                                            " bytes of shared memory per block; the device allows " +
                                            std::to_string(device.shared_limit));
  }
  auto* kernel = &hopper_flash_kernel<T, HeadDimQk, HeadDimV, Causal>;
  gpu::set_max_dynamic_shared_memory(kernel, static_cast<int>(launch.shared_bytes), launch.kernel);
  // The tile counter: this launch's own, so launches on other streams never
  // share one; stream-ordered, so it costs no synchronization.
  TileCounter counter(device.counter_pool, stream, launch.kernel);
  launch.grid.schedule.tile_counter = counter.get();
  const HopperMaps& maps = launch.maps;
  kernel<<<static_cast<unsigned>(launch.grid.blocks), block_threads, launch.shared_bytes, stream>>>(
      params, launch.grid.schedule, maps.q, maps.k, maps.v, maps.o);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

// --- The compiled instantiations, declared for the dispatch ---

#define MLA_HOPPER_DECLARE(T, QK, V)                                                                                \
  extern template void launch_hopper_forward<T, QK, V, true>(const FlashParams&, gpu::Stream, const LaunchDevice&); \
  extern template void launch_hopper_forward<T, QK, V, false>(const FlashParams&, gpu::Stream, const LaunchDevice&);
#define MLA_FLASH_SHAPE(nope, rope, v)                    \
  MLA_HOPPER_DECLARE(__nv_bfloat16, (nope) + (rope), (v)) \
  MLA_HOPPER_DECLARE(__half, (nope) + (rope), (v))
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_HOPPER_DECLARE

// --- Per file: a pair's instantiations, or the dispatch ---
//
// A generated hopper_dqk<QK>_dv<V>.cu (cmake/MlaFlashShapes.cmake) defines
// the instantiations of its pair; every other includer (hopper_backend.cu)
// gets the dispatch. Apart because the dispatch instantiates the split-KV
// merge kernels, which one file compiles, not one per pair.
#if defined(MLA_FLASH_QK) && defined(MLA_FLASH_V)

template void launch_hopper_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream,
                                                                                    const LaunchDevice&);
template void launch_hopper_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream,
                                                                                     const LaunchDevice&);
template void launch_hopper_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream,
                                                                             const LaunchDevice&);
template void launch_hopper_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream,
                                                                              const LaunchDevice&);

#else

namespace detail {

template <class T, int HeadDimQk, int HeadDimV>
void launch_causal_or_not(const FlashParams& params, gpu::Stream stream, const LaunchDevice& device) {
  if (params.causal) {
    launch_hopper_forward<T, HeadDimQk, HeadDimV, true>(params, stream, device);
  } else {
    launch_hopper_forward<T, HeadDimQk, HeadDimV, false>(params, stream, device);
  }
}

template <class T>
void launch_for_dims(const FlashParams& params, int head_dim_qk, int head_dim_v, gpu::Stream stream,
                     const LaunchDevice& device) {
#define MLA_FLASH_SHAPE(nope, rope, v)                     \
  if (head_dim_qk == (nope) + (rope) && head_dim_v == (v)) \
    return launch_causal_or_not<T, (nope) + (rope), (v)>(params, stream, device);
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
  raise(ErrorCategory::internal, "HOPPER_FLASH: head dims " + std::to_string(head_dim_qk) + "/" +
                                     std::to_string(head_dim_v) + " have a tile configuration but no kernel");
}

// MLA_HOPPER_HEAD_GROUP=n caps the heads per L2 group at n instead of sizing
// the groups from the L2: a tuning knob for benchmarks. Unset or empty: 0.
inline int head_group_override() { return gpu::whole_number_setting("MLA_HOPPER_HEAD_GROUP", 1024); }

// The pool the launches' tile counters come from, one per device, made on
// first use and kept for the process. Not the device's default pool: that
// one gives its memory back at every synchronization (release threshold 0)
// and maps it again at the next allocation, tens of microseconds in front of
// a kernel that may itself take 40; this one keeps what it has, and the
// application's pools stay as it set them.
inline cudaMemPool_t counter_pool(int device) {
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

}  // namespace detail

// Enqueues the attention with the kernel `kernel` names (the answer of
// choose_kernel for the queue's device) on `queue`'s stream: the backend's
// launch (hopper_backend.cu). Host work only besides the launch: the tensor
// maps are encoded on the host and passed by value, nothing is waited for,
// and under stream capture the tile counter comes from the graph, so the
// call can be captured into a CUDA graph. Raises Error(invalid_argument) for
// a layout no tensor map describes, and Error(device) naming the kernel when
// the launch fails.
inline void launch_hopper_flash(Queue& queue, const FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  gpu::DeviceGuard guard(queue.device_index());
  const gpu::Stream stream = gpu::stream_of(queue);
  LaunchDevice device{queue.capability().shared_memory_per_block, queue.capability().multiprocessors};
  int l2_bytes = 0;
  gpu::check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, queue.device_index()), "DeviceGetAttribute",
             "the L2 size of device " + std::to_string(queue.device_index()));
  device.l2_bytes = static_cast<std::size_t>(std::max(l2_bytes, 0));
  device.max_head_group = detail::head_group_override();
  // A pool cannot be made while the stream is captured (nor anything else
  // allocated outside the graph): the counter then comes from the graph.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  gpu::check(cudaStreamIsCapturing(stream, &capture), "StreamIsCapturing", "HOPPER_FLASH's launch");
  device.counter_pool = capture == cudaStreamCaptureStatusNone ? detail::counter_pool(queue.device_index()) : nullptr;
  if (dtype == DType::bfloat16) {
    detail::launch_for_dims<__nv_bfloat16>(params, kernel.head_dim_qk, kernel.head_dim_v, stream, device);
  } else {
    detail::launch_for_dims<__half>(params, kernel.head_dim_qk, kernel.head_dim_v, stream, device);
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

#endif

}  // namespace mla::hopper_flash
