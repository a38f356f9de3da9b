// mla::Queue on an NVIDIA GPU: one non-blocking CUDA stream per queue, USM-style
// allocations, and events with timing. Every runtime call is checked and a
// failure becomes Error(device) naming the call, the runtime's message and what
// the queue was doing; destructors report nothing and never throw.
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mla/detail/queue_impl.hpp"
#include "mla/error.hpp"
#include "mla/log.hpp"
#include "vendor_devices.hpp"

namespace mla::detail {
namespace {

void check(cudaError_t code, const char* call, const std::string& context) {
  if (code == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  raise(ErrorCategory::device, std::string(call) + " failed: " + cudaGetErrorString(code) + " (" + context + ")");
}

// Makes `device` current for the lifetime of the guard: allocations and event
// creation act on the current device, and a queue may be used from a thread
// whose current device is another one.
class DeviceGuard {
 public:
  DeviceGuard(int device, const std::string& context) {
    check(cudaGetDevice(&previous_), "cudaGetDevice", context);
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice", context);
  }
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

class CudaEvent final : public EventImpl {
 public:
  CudaEvent(int device, cudaStream_t stream) : device_(device) {
    DeviceGuard guard(device_, context());
    check(cudaEventCreate(&event_), "cudaEventCreate", context());
    const cudaError_t recorded = cudaEventRecord(event_, stream);
    if (recorded != cudaSuccess) {
      (void)cudaEventDestroy(event_);
      check(recorded, "cudaEventRecord", context());
    }
  }
  ~CudaEvent() override { (void)cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void wait() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize", context()); }

  double elapsed_ms_since(EventImpl& start) override {
    auto* begin = dynamic_cast<CudaEvent*>(&start);
    if (begin == nullptr || begin->device_ != device_) {
      raise(ErrorCategory::invalid_argument, "Event::elapsed_ms between events of different queues");
    }
    wait();
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, begin->event_, event_), "cudaEventElapsedTime", context());
    return static_cast<double>(ms);
  }

 private:
  std::string context() const { return "event on CUDA device " + std::to_string(device_); }

  int device_;
  cudaEvent_t event_ = nullptr;
};

DeviceCapability capability_of(int device_index) {
  const std::string context = "creating a CUDA queue on device " + std::to_string(device_index);
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount", context);
  if (device_index < 0 || device_index >= count) {
    raise(ErrorCategory::device,
          "no CUDA device " + std::to_string(device_index) + ": this machine has " + std::to_string(count));
  }
  const std::vector<DeviceCapability> devices = detect_cuda_devices();
  if (static_cast<int>(devices.size()) != count) {
    raise(ErrorCategory::device,
          "the CUDA runtime could not describe device " + std::to_string(device_index) + " (" + context + ")");
  }
  return devices[static_cast<std::size_t>(device_index)];
}

class CudaQueue final : public QueueImpl {
 public:
  explicit CudaQueue(int device_index) : device_(device_index), capability_(capability_of(device_index)) {
    DeviceGuard guard(device_, context());
    // Non-blocking: the queue must not serialise with work on the legacy default stream.
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", context());
  }

  ~CudaQueue() override {
    // Work still in flight finishes; buffers of this queue keep it alive, so
    // nothing the stream uses is freed before this point.
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  CudaQueue(const CudaQueue&) = delete;
  CudaQueue& operator=(const CudaQueue&) = delete;

  DeviceBackend backend() const override { return DeviceBackend::cuda; }
  int device_index() const override { return device_; }
  const DeviceCapability& capability() const override { return capability_; }
  void* native_stream() const override { return static_cast<void*>(stream_); }

  // Kernels read device and managed memory; pageable host memory is not
  // reachable from a kernel on every system, so host is refused.
  bool can_access(MemoryKind kind) const override { return kind != MemoryKind::host; }

  void* allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0) return nullptr;
    const std::string what =
        context(std::to_string(bytes) + " bytes of " + std::string(memory_kind_name(kind)) + " memory");
    DeviceGuard guard(device_, what);
    void* ptr = nullptr;
    switch (kind) {
      case MemoryKind::device:
        check(cudaMalloc(&ptr, bytes), "cudaMalloc", what);
        break;
      case MemoryKind::host:
        check(cudaMallocHost(&ptr, bytes), "cudaMallocHost", what);
        break;
      case MemoryKind::shared:
        check(cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal), "cudaMallocManaged", what);
        break;
    }
    return ptr;
  }

  void deallocate(void* ptr, MemoryKind kind) noexcept override {
    if (ptr == nullptr) return;
    int previous = 0;
    const bool switched =
        cudaGetDevice(&previous) == cudaSuccess && previous != device_ && cudaSetDevice(device_) == cudaSuccess;
    const cudaError_t code = kind == MemoryKind::host ? cudaFreeHost(ptr) : cudaFree(ptr);
    if (code != cudaSuccess) {
      (void)cudaGetLastError();
      // A destructor path: report, never throw.
      try {
        log(LogLevel::warn, std::string(kind == MemoryKind::host ? "cudaFreeHost" : "cudaFree") +
                                " failed: " + cudaGetErrorString(code) + " (" + context() + ")");
      } catch (...) {
      }
    }
    if (switched) (void)cudaSetDevice(previous);
  }

  void memcpy(void* dst, const void* src, std::size_t bytes) override {
    // cudaMemcpyDefault: unified addressing tells the direction from the pointers.
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync",
          context(std::to_string(bytes) + " bytes"));
  }

  void memset(void* dst, int value, std::size_t bytes) override {
    const std::string what = context(std::to_string(bytes) + " bytes");
    cudaPointerAttributes attributes{};
    check(cudaPointerGetAttributes(&attributes, dst), "cudaPointerGetAttributes", what);
    if (attributes.type == cudaMemoryTypeUnregistered || attributes.type == cudaMemoryTypeHost) {
      // Host memory (pageable or pinned): cudaMemsetAsync is for device
      // memory, so keep the queue's order by finishing earlier work first and
      // set it here.
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", what);
      std::memset(dst, value, bytes);
      return;
    }
    check(cudaMemsetAsync(dst, value, bytes, stream_), "cudaMemsetAsync", what);
  }

  std::shared_ptr<EventImpl> record() override { return std::make_shared<CudaEvent>(device_, stream_); }

  void wait() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", context()); }

 private:
  std::string context(const std::string& detail = {}) const {
    std::string text = "CUDA queue on device " + std::to_string(device_);
    if (!detail.empty()) text += ", " + detail;
    return text;
  }

  int device_;
  DeviceCapability capability_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<QueueImpl> make_cuda_queue(int device_index) { return std::make_shared<CudaQueue>(device_index); }

}  // namespace mla::detail
