// The vendor runtime behind the project's own names. The GPU queue
// (gpu_queue.cu), the launchers and the merge call mla::gpu::memcpy_async,
// mla::gpu::check_launch, ... and this header maps them to the CUDA or the HIP
// runtime; nothing renames the vendor API globally. Every wrapper checks the
// result and raises Error(device):
//   "cudaMemcpyAsync failed: <runtime message> (<context>)".
// The few places where the two runtimes differ in more than a prefix (pinned
// host allocation, what a pointer query says about pageable memory, the
// dynamic shared memory attribute) are the #if branches below.
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
#include <new>
#include <string>
#include <string_view>

#include "gpu_namespace.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::gpu {

using Stream = MLA_GPU_VENDOR(cudaStream_t, hipStream_t);
using Event = MLA_GPU_VENDOR(cudaEvent_t, hipEvent_t);
using ErrorCode = MLA_GPU_VENDOR(cudaError_t, hipError_t);
inline constexpr ErrorCode success = MLA_GPU_VENDOR(cudaSuccess, hipSuccess);

// "cuda" or "hip", for messages.
inline constexpr std::string_view vendor_prefix = MLA_GPU_API_PREFIX;
// "CUDA" or "HIP", for messages, and the queue backend of this build.
inline constexpr std::string_view vendor_name = MLA_GPU_VENDOR("CUDA", "HIP");
inline constexpr DeviceBackend backend = MLA_GPU_VENDOR(DeviceBackend::cuda, DeviceBackend::hip);

inline std::string error_string(ErrorCode code) { return MLA_GPU_VENDOR(cudaGetErrorString, hipGetErrorString)(code); }

// `call` without the vendor prefix: check(code, "MemcpyAsync", ...) reports cudaMemcpyAsync / hipMemcpyAsync.
inline void check(ErrorCode code, std::string_view call, std::string_view context) {
  if (code == success) return;
  (void)MLA_GPU_VENDOR(cudaGetLastError, hipGetLastError)();  // clear a non-sticky error
  raise(ErrorCategory::device, std::string(vendor_prefix) + std::string(call) + " failed: " + error_string(code) +
                                   " (" + std::string(context) + ")");
}

// For teardown paths, which must not throw: a failed call is logged as a
// warning and its error cleared, so that the next check_launch does not
// report it as that kernel's failure. (A sticky error stays: it ends the
// context, and every later call reports it.)
inline void quietly(ErrorCode code, std::string_view call) noexcept {
  if (code == success) return;
  (void)MLA_GPU_VENDOR(cudaGetLastError, hipGetLastError)();
  try {
    mla::log(LogLevel::warn,
             std::string(vendor_prefix) + std::string(call) + " failed during teardown: " + error_string(code));
  } catch (...) {
  }
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

inline int device_count(std::string_view context) {
  int count = 0;
  check(MLA_GPU_VENDOR(cudaGetDeviceCount, hipGetDeviceCount)(&count), "GetDeviceCount", context);
  return count;
}

// A stream that does not serialise with work on the legacy default (null) stream.
inline Stream create_stream(std::string_view context) {
  Stream stream = nullptr;
  check(MLA_GPU_VENDOR(cudaStreamCreateWithFlags, hipStreamCreateWithFlags)(
            &stream, MLA_GPU_VENDOR(cudaStreamNonBlocking, hipStreamNonBlocking)),
        "StreamCreateWithFlags", context);
  return stream;
}

// Lets work in flight finish, then destroys the stream; for destructors.
inline void destroy_stream(Stream stream) noexcept {
  // A kernel's asynchronous fault often shows up here, at the last sync.
  quietly(MLA_GPU_VENDOR(cudaStreamSynchronize, hipStreamSynchronize)(stream), "StreamSynchronize");
  quietly(MLA_GPU_VENDOR(cudaStreamDestroy, hipStreamDestroy)(stream), "StreamDestroy");
}

inline void synchronize(Stream stream, std::string_view context) {
  check(MLA_GPU_VENDOR(cudaStreamSynchronize, hipStreamSynchronize)(stream), "StreamSynchronize", context);
}

// An event with timing, recorded on `stream`; nothing leaks when recording fails.
inline Event record_event(Stream stream, std::string_view context) {
  Event event = nullptr;
  check(MLA_GPU_VENDOR(cudaEventCreate, hipEventCreate)(&event), "EventCreate", context);
  const ErrorCode recorded = MLA_GPU_VENDOR(cudaEventRecord, hipEventRecord)(event, stream);
  if (recorded != success) {
    (void)MLA_GPU_VENDOR(cudaEventDestroy, hipEventDestroy)(event);
    check(recorded, "EventRecord", context);
  }
  return event;
}

inline void destroy_event(Event event) noexcept {
  quietly(MLA_GPU_VENDOR(cudaEventDestroy, hipEventDestroy)(event), "EventDestroy");
}

// Later work on `stream` waits for `event`; the host does not.
inline void stream_wait(Stream stream, Event event, std::string_view context) {
  check(MLA_GPU_VENDOR(cudaStreamWaitEvent, hipStreamWaitEvent)(stream, event, 0), "StreamWaitEvent", context);
}

inline void synchronize(Event event, std::string_view context) {
  check(MLA_GPU_VENDOR(cudaEventSynchronize, hipEventSynchronize)(event), "EventSynchronize", context);
}

inline float elapsed_ms(Event start, Event stop, std::string_view context) {
  float ms = 0.0f;
  check(MLA_GPU_VENDOR(cudaEventElapsedTime, hipEventElapsedTime)(&ms, start, stop), "EventElapsedTime", context);
  return ms;
}

// USM-style allocation on the current device: device, pinned host or managed memory.
inline void* allocate(std::size_t bytes, MemoryKind kind, std::string_view context) {
  void* ptr = nullptr;
  switch (kind) {
    case MemoryKind::device:
      check(MLA_GPU_VENDOR(cudaMalloc, hipMalloc)(&ptr, bytes), "Malloc", context);
      break;
    case MemoryKind::host:
#if defined(MLA_HIP_COMPILE)
      check(hipHostMalloc(&ptr, bytes, hipHostMallocDefault), "HostMalloc", context);
#else
      check(cudaMallocHost(&ptr, bytes), "MallocHost", context);
#endif
      break;
    case MemoryKind::shared:
      check(MLA_GPU_VENDOR(cudaMallocManaged, hipMallocManaged)(
                &ptr, bytes, MLA_GPU_VENDOR(cudaMemAttachGlobal, hipMemAttachGlobal)),
            "MallocManaged", context);
      break;
  }
  return ptr;
}

// Frees what allocate() returned; for destructors: returns the runtime's
// message on failure (empty on success) instead of raising.
inline std::string free_quietly(void* ptr, MemoryKind kind) noexcept {
  const bool pinned = kind == MemoryKind::host;
  const ErrorCode code =
      pinned ? MLA_GPU_VENDOR(cudaFreeHost, hipHostFree)(ptr) : MLA_GPU_VENDOR(cudaFree, hipFree)(ptr);
  if (code == success) return {};
  (void)MLA_GPU_VENDOR(cudaGetLastError, hipGetLastError)();
  try {
    return std::string(vendor_prefix) + (pinned ? MLA_GPU_VENDOR("FreeHost", "HostFree") : "Free") +
           " failed: " + error_string(code);
  } catch (...) {
    return "free failed";
  }
}

// Whether `ptr` is host memory (pageable or pinned) rather than device or managed.
inline bool is_host_memory(const void* ptr, std::string_view context) {
#if defined(MLA_HIP_COMPILE)
  // Pageable memory the runtime never saw makes hipPointerGetAttributes fail
  // with hipErrorInvalidValue (HIP 5.x); that, like pinned memory, is host.
  hipPointerAttribute_t attributes{};
  const hipError_t code = hipPointerGetAttributes(&attributes, ptr);
  if (code == hipErrorInvalidValue) {
    (void)hipGetLastError();
    return true;
  }
  check(code, "PointerGetAttributes", context);
  return attributes.memoryType == hipMemoryTypeHost && !attributes.isManaged;
#else
  // CUDA 11 and later report pageable memory as unregistered.
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, ptr), "PointerGetAttributes", context);
  return attributes.type == cudaMemoryTypeUnregistered || attributes.type == cudaMemoryTypeHost;
#endif
}

inline int multiprocessor_count(int device) {
  int count = 0;
  check(MLA_GPU_VENDOR(cudaDeviceGetAttribute, hipDeviceGetAttribute)(
            &count, MLA_GPU_VENDOR(cudaDevAttrMultiProcessorCount, hipDeviceAttributeMultiprocessorCount), device),
        "DeviceGetAttribute", "multiprocessor count");
  return count;
}

// Makes a queue's device current for the guard's lifetime: a kernel must be
// launched on the device its stream belongs to, and allocations and events act
// on the current device, whatever the calling thread used last. Restores the
// previous device; the destructor never throws.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device, std::string_view context = "device guard") {
    check(MLA_GPU_VENDOR(cudaGetDevice, hipGetDevice)(&previous_), "GetDevice", context);
    if (previous_ != device) {
      check(MLA_GPU_VENDOR(cudaSetDevice, hipSetDevice)(device), "SetDevice", context);
      switched_ = true;
    }
  }
  // For destructor paths: switches if it can and never throws.
  DeviceGuard(int device, std::nothrow_t) noexcept {
    switched_ = MLA_GPU_VENDOR(cudaGetDevice, hipGetDevice)(&previous_) == success && previous_ != device &&
                MLA_GPU_VENDOR(cudaSetDevice, hipSetDevice)(device) == success;
  }
  ~DeviceGuard() {
    if (switched_) quietly(MLA_GPU_VENDOR(cudaSetDevice, hipSetDevice)(previous_), "SetDevice");
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace mla::gpu
