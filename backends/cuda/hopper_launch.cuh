// The CUDA launch of the HOPPER_FLASH kernel, top to bottom: what the
// launch needs of the device, the tile counter, the <<<>>> launch of one
// instantiation from its recipe (hopper_launch.hpp), the compiled
// instantiations (four per (qk, v) pair of cuda_hip/flash_shapes.def: bf16 /
// fp16 x causal / non-causal), declared for the dispatch (hopper_backend.cu).
// CMake generates one hopper_dqk<QK>_dv<V>.cu per pair that defines
// MLA_FLASH_QK and MLA_FLASH_V and includes this header, which then defines
// that pair's instantiations (the last block). CUDA only: the emulator
// (tests/support/simt) starts the blocks of the same recipe itself.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/gpu_runtime.hpp"
#include "hopper_kernel.cuh"
#include "hopper_launch.hpp"

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

// One int from `pool` (hopper_backend.cu's counter_pool: the library's own, never
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

// The explicit instantiations of the pair a generated hopper_dqk<QK>_dv<V>.cu
// names (cmake/MlaFlashShapes.cmake).
#if defined(MLA_FLASH_QK) && defined(MLA_FLASH_V)

template void launch_hopper_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream,
                                                                                    const LaunchDevice&);
template void launch_hopper_forward<__nv_bfloat16, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream,
                                                                                     const LaunchDevice&);
template void launch_hopper_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, true>(const FlashParams&, gpu::Stream,
                                                                             const LaunchDevice&);
template void launch_hopper_forward<__half, MLA_FLASH_QK, MLA_FLASH_V, false>(const FlashParams&, gpu::Stream,
                                                                              const LaunchDevice&);

#endif

}  // namespace mla::hopper_flash
