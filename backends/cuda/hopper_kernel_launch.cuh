// The <<<>>> launch of the HOPPER_FLASH kernel from its recipe
// (hopper_schedule.hpp: name, persistent grid, shared memory, tensor maps):
// the device's shared-memory limit and opt-in, the tile counter and the
// launch error. Included only by hopper_instantiate.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "cuda_hip/gpu_runtime.hpp"
#include "hopper_instances.hpp"
#include "hopper_kernel.cuh"
#include "hopper_maps.hpp"
#include "hopper_schedule.hpp"

namespace mla::hopper_flash {

// One int from `pool` (hopper_dispatch.cu: the library's own, never
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

}  // namespace mla::hopper_flash
