// The CUDA launch of the HOPPER_FLASH kernel, top to bottom: what the
// launch needs of the device, the tile counter, the <<<>>> launch of one
// instantiation from its recipe (hopper_launch.hpp), the compiled
// instantiations (eight per (qk, v) pair of cuda_hip/flash_shapes.def: bf16,
// fp16, e4m3 -> bf16 and e4m3 -> fp16 x causal / non-causal), declared for the dispatch (hopper_backend.cu).
// CMake generates one hopper_dqk<QK>_dv<V>.cu per pair that defines
// MLA_FLASH_QK and MLA_FLASH_V and includes this header, which then defines
// that pair's instantiations (the last block). CUDA only: the emulator
// (tests/support/simt) starts the blocks of the same recipe itself.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

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

// `bytes` from `pool` (hopper_backend.cu's counter_pool: the library's own,
// never trimmed, so that a steady stream of launches maps no memory), zeroed
// on `stream` when asked, freed on `stream` after whatever the stream runs in
// between. Without a pool (the stream is being captured) it comes from
// cudaMallocAsync: the graph records an allocation node and owns that memory.
// `what` names it in errors ("hopper_flash<...>: the tile counter").
class StreamBuffer {
 public:
  StreamBuffer(cudaMemPool_t pool, gpu::Stream stream, std::size_t bytes, bool zero, std::string what)
      : stream_(stream), what_(std::move(what)) {
    if (pool == nullptr) {
      gpu::check(cudaMallocAsync(&data_, bytes, stream), "MallocAsync", what_);
    } else {
      gpu::check(cudaMallocFromPoolAsync(&data_, bytes, pool, stream), "MallocFromPoolAsync", what_);
    }
    const cudaError_t zeroed = zero ? cudaMemsetAsync(data_, 0, bytes, stream) : cudaSuccess;
    if (zeroed != cudaSuccess) {
      (void)cudaFreeAsync(data_, stream_);
      gpu::check(zeroed, "MemsetAsync", what_);
    }
  }
  ~StreamBuffer() { gpu::quietly(cudaFreeAsync(data_, stream_), "FreeAsync (" + what_ + ")"); }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  void* get() const { return data_; }

 private:
  gpu::Stream stream_;
  std::string what_;
  void* data_ = nullptr;
};

// e4m3 inputs: the transposed copy of V the kernel reads (hopper_config.hpp),
// written on `stream` by transpose_v_e4m3 into `vt`.
template <int HeadDimV>
void transpose_v(const FlashParams& params, gpu::Stream stream, void* vt, const std::string& kernel) {
  const TransposeGrid grid = transpose_grid(params, HeadDimV);
  transpose_v_e4m3<HeadDimV><<<dim3(grid.blocks_x, grid.heads), grid.threads, 0, stream>>>(
      params, static_cast<unsigned char*>(vt), grid.columns);
  gpu::check_launch("transpose_v_e4m3<" + std::to_string(HeadDimV) + ">",
                    "the transposed v of " + kernel + ": " + std::to_string(grid.columns) + " columns x " +
                        std::to_string(grid.heads) + " heads");
}

// KeyMask: the launch has docs/contract.md §12's top-k mask or window
// (params.mask.masks_keys()), which only those instantiations read.
template <class T, int HeadDimQk, int HeadDimV, bool Causal, class In = T, bool KeyMask = false>
void launch_hopper_forward(const FlashParams& params, gpu::Stream stream, const LaunchDevice& device) {
  constexpr DType dtype = cuda_flash::element_dtype<T>;
  constexpr bool e4m3 = sizeof(In) == 1;
  const int max_group = device.max_head_group > 0
                            ? device.max_head_group
                            : l2_max_head_group(device.l2_bytes, params.k_tokens, HeadDimQk, HeadDimV);
  if (params.num_work == 0 || params.num_heads == 0) return;
  // e4m3: the transposed copy of V, this launch's own as the tile counter is.
  std::unique_ptr<StreamBuffer> vt;
  if constexpr (e4m3) {
    vt = std::make_unique<StreamBuffer>(device.counter_pool, stream, transposed_v_bytes(params, HeadDimV), false,
                                        "HOPPER_FLASH's transposed v");
  }
  HopperLaunch launch = plan_hopper_launch<HeadDimQk, HeadDimV, Causal>(params, dtype, device.multiprocessors,
                                                                        max_group, vt != nullptr ? vt->get() : nullptr);
  if (launch.grid.blocks == 0) return;
  if (launch.shared_bytes > device.shared_limit) {
    raise(ErrorCategory::not_supported, launch.kernel + " needs " + std::to_string(launch.shared_bytes) +
                                            " bytes of shared memory per block; the device allows " +
                                            std::to_string(device.shared_limit));
  }
  auto* kernel = &hopper_flash_kernel<T, HeadDimQk, HeadDimV, Causal, In, KeyMask>;
  gpu::set_max_dynamic_shared_memory(kernel, static_cast<int>(launch.shared_bytes), launch.kernel);
  // The tile counter: this launch's own, so launches on other streams never
  // share one; stream-ordered, so it costs no synchronization.
  StreamBuffer counter(device.counter_pool, stream, sizeof(int), true, launch.kernel + ": the tile counter");
  launch.grid.schedule.tile_counter = static_cast<int*>(counter.get());
  if constexpr (e4m3) transpose_v<HeadDimV>(params, stream, vt->get(), launch.kernel);
  const HopperMaps& maps = launch.maps;
  kernel<<<static_cast<unsigned>(launch.grid.blocks), block_threads, launch.shared_bytes, stream>>>(
      params, launch.grid.schedule, maps.q, maps.k, maps.v, maps.o);
  gpu::check_launch(launch.kernel, launch.describe(params));
}

// --- The compiled instantiations, declared for the dispatch ---

#define MLA_HOPPER_DECLARE(T, QK, V, In)                                                                  \
  extern template void launch_hopper_forward<T, QK, V, true, In, false>(const FlashParams&, gpu::Stream,  \
                                                                        const LaunchDevice&);             \
  extern template void launch_hopper_forward<T, QK, V, false, In, false>(const FlashParams&, gpu::Stream, \
                                                                         const LaunchDevice&);            \
  extern template void launch_hopper_forward<T, QK, V, true, In, true>(const FlashParams&, gpu::Stream,   \
                                                                       const LaunchDevice&);              \
  extern template void launch_hopper_forward<T, QK, V, false, In, true>(const FlashParams&, gpu::Stream,  \
                                                                        const LaunchDevice&);
#define MLA_FLASH_SHAPE(nope, rope, v)                                   \
  MLA_HOPPER_DECLARE(__nv_bfloat16, (nope) + (rope), (v), __nv_bfloat16) \
  MLA_HOPPER_DECLARE(__half, (nope) + (rope), (v), __half)               \
  MLA_HOPPER_DECLARE(__nv_bfloat16, (nope) + (rope), (v), __nv_fp8_e4m3) \
  MLA_HOPPER_DECLARE(__half, (nope) + (rope), (v), __nv_fp8_e4m3)
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
#undef MLA_HOPPER_DECLARE

// The explicit instantiations of the pair a generated hopper_dqk<QK>_dv<V>.cu
// names (cmake/MlaFlashShapes.cmake): bf16 and fp16 inputs, and e4m3 inputs
// with a bf16 or fp16 output, causal or not, with a key mask or not.
#if defined(MLA_FLASH_QK) && defined(MLA_FLASH_V)

#define MLA_HOPPER_INSTANTIATE(T, In)                                                                                  \
  template void launch_hopper_forward<T, MLA_FLASH_QK, MLA_FLASH_V, true, In, false>(const FlashParams&, gpu::Stream,  \
                                                                                     const LaunchDevice&);             \
  template void launch_hopper_forward<T, MLA_FLASH_QK, MLA_FLASH_V, false, In, false>(const FlashParams&, gpu::Stream, \
                                                                                      const LaunchDevice&);            \
  template void launch_hopper_forward<T, MLA_FLASH_QK, MLA_FLASH_V, true, In, true>(const FlashParams&, gpu::Stream,   \
                                                                                    const LaunchDevice&);              \
  template void launch_hopper_forward<T, MLA_FLASH_QK, MLA_FLASH_V, false, In, true>(const FlashParams&, gpu::Stream,  \
                                                                                     const LaunchDevice&);
MLA_HOPPER_INSTANTIATE(__nv_bfloat16, __nv_bfloat16)
MLA_HOPPER_INSTANTIATE(__half, __half)
MLA_HOPPER_INSTANTIATE(__nv_bfloat16, __nv_fp8_e4m3)
MLA_HOPPER_INSTANTIATE(__half, __nv_fp8_e4m3)
#undef MLA_HOPPER_INSTANTIATE

#endif

}  // namespace mla::hopper_flash
