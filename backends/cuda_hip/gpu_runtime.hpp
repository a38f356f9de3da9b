// The vendor runtime behind the project's own names. Code in backends/cuda_hip
// calls mla::gpu::memcpy_async, mla::gpu::check_launch, ... and this header maps
// them to the CUDA or the HIP runtime; nothing renames the vendor API
// globally. Every wrapper checks the result and raises Error(device):
//   "cudaMemcpyAsync failed: <runtime message> (<context>)".
#pragma once

#if defined(MLA_HIP_COMPILE)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define MLA_GPU_VENDOR(cuda_name, hip_name) hip_name
#define MLA_GPU_API_PREFIX "hip"
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define MLA_GPU_VENDOR(cuda_name, hip_name) cuda_name
#define MLA_GPU_API_PREFIX "cuda"
#endif

#include <cstddef>
#include <string>
#include <string_view>

#include "gpu_namespace.hpp"
#include "mla/error.hpp"
#include "mla/queue.hpp"

namespace mla::gpu {

using Stream = MLA_GPU_VENDOR(cudaStream_t, hipStream_t);
using ErrorCode = MLA_GPU_VENDOR(cudaError_t, hipError_t);
inline constexpr ErrorCode success = MLA_GPU_VENDOR(cudaSuccess, hipSuccess);

// "cuda" or "hip", for messages.
inline constexpr std::string_view vendor_prefix = MLA_GPU_API_PREFIX;

inline std::string error_string(ErrorCode code) { return MLA_GPU_VENDOR(cudaGetErrorString, hipGetErrorString)(code); }

// `call` without the vendor prefix: check(code, "MemcpyAsync", ...) reports cudaMemcpyAsync / hipMemcpyAsync.
inline void check(ErrorCode code, std::string_view call, std::string_view context) {
  if (code == success) return;
  (void)MLA_GPU_VENDOR(cudaGetLastError, hipGetLastError)();  // clear a non-sticky error
  raise(ErrorCategory::device, std::string(vendor_prefix) + std::string(call) + " failed: " + error_string(code) +
                                   " (" + std::string(context) + ")");
}

// After a <<<...>>> launch: configuration errors (too much shared memory, bad
// grid) show up here, named after the kernel.
inline void check_launch(std::string_view kernel, std::string_view context) {
  const ErrorCode code = MLA_GPU_VENDOR(cudaGetLastError, hipGetLastError)();
  if (code == success) return;
  raise(ErrorCategory::device,
        "launch of " + std::string(kernel) + " failed: " + error_string(code) + " (" + std::string(context) + ")");
}

inline Stream stream_of(const Queue& queue) { return static_cast<Stream>(queue.native_stream()); }

inline void memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream, std::string_view context) {
  check(MLA_GPU_VENDOR(cudaMemcpyAsync, hipMemcpyAsync)(dst, src, bytes,
                                                        MLA_GPU_VENDOR(cudaMemcpyDefault, hipMemcpyDefault), stream),
        "MemcpyAsync", context);
}

inline void memset_async(void* dst, int value, std::size_t bytes, Stream stream, std::string_view context) {
  check(MLA_GPU_VENDOR(cudaMemsetAsync, hipMemsetAsync)(dst, value, bytes, stream), "MemsetAsync", context);
}

// Kernels asking for more than 48 KiB of dynamic shared memory must opt in.
template <class Kernel>
void set_max_dynamic_shared_memory(Kernel* kernel, int bytes, std::string_view kernel_name) {
#if defined(MLA_HIP_COMPILE)
  check(hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize, bytes),
        "FuncSetAttribute", kernel_name);
#else
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), "FuncSetAttribute",
        kernel_name);
#endif
}

inline int multiprocessor_count(int device) {
  int count = 0;
  check(MLA_GPU_VENDOR(cudaDeviceGetAttribute, hipDeviceGetAttribute)(
            &count, MLA_GPU_VENDOR(cudaDevAttrMultiProcessorCount, hipDeviceAttributeMultiprocessorCount), device),
        "DeviceGetAttribute", "multiprocessor count");
  return count;
}

// Makes a queue's device current while a launch is set up: a kernel must be
// launched on the device its stream belongs to, whatever the calling thread
// used last. Restores the previous device; the destructor never throws.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(MLA_GPU_VENDOR(cudaGetDevice, hipGetDevice)(&previous_), "GetDevice", "device guard");
    if (previous_ != device) {
      check(MLA_GPU_VENDOR(cudaSetDevice, hipSetDevice)(device), "SetDevice", "device guard");
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) (void)MLA_GPU_VENDOR(cudaSetDevice, hipSetDevice)(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace mla::gpu
