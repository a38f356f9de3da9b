// mla::Queue on an AMD GPU: one non-blocking HIP stream per queue, USM-style
// allocations, and events with timing. Every runtime call is checked and a
// failure becomes Error(device) naming the call, the runtime's message and what
// the queue was doing; destructors report nothing and never throw.
#include <hip/hip_runtime.h>

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

void check(hipError_t code, const char* call, const std::string& context) {
  if (code == hipSuccess) return;
  (void)hipGetLastError();  // clear the error so the next call starts clean
  raise(ErrorCategory::device, std::string(call) + " failed: " + hipGetErrorString(code) + " (" + context + ")");
}

// Makes `device` current for the lifetime of the guard: allocations and event
// creation act on the current device, and a queue may be used from a thread
// whose current device is another one.
class DeviceGuard {
 public:
  DeviceGuard(int device, const std::string& context) {
    check(hipGetDevice(&previous_), "hipGetDevice", context);
    if (previous_ != device) {
      check(hipSetDevice(device), "hipSetDevice", context);
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) (void)hipSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

class HipEvent final : public EventImpl {
 public:
  HipEvent(int device, hipStream_t stream) : device_(device) {
    DeviceGuard guard(device_, context());
    check(hipEventCreate(&event_), "hipEventCreate", context());
    const hipError_t recorded = hipEventRecord(event_, stream);
    if (recorded != hipSuccess) {
      (void)hipEventDestroy(event_);
      check(recorded, "hipEventRecord", context());
    }
  }
  ~HipEvent() override { (void)hipEventDestroy(event_); }
  HipEvent(const HipEvent&) = delete;
  HipEvent& operator=(const HipEvent&) = delete;

  void wait() override { check(hipEventSynchronize(event_), "hipEventSynchronize", context()); }

  double elapsed_ms_since(EventImpl& start) override {
    auto* begin = dynamic_cast<HipEvent*>(&start);
    if (begin == nullptr || begin->device_ != device_) {
      raise(ErrorCategory::invalid_argument, "Event::elapsed_ms between events of different queues");
    }
    wait();
    float ms = 0.0f;
    check(hipEventElapsedTime(&ms, begin->event_, event_), "hipEventElapsedTime", context());
    return static_cast<double>(ms);
  }

 private:
  std::string context() const { return "event on HIP device " + std::to_string(device_); }

  int device_;
  hipEvent_t event_ = nullptr;
};

DeviceCapability capability_of(int device_index) {
  const std::string context = "creating a HIP queue on device " + std::to_string(device_index);
  int count = 0;
  check(hipGetDeviceCount(&count), "hipGetDeviceCount", context);
  if (device_index < 0 || device_index >= count) {
    raise(ErrorCategory::device,
          "no HIP device " + std::to_string(device_index) + ": this machine has " + std::to_string(count));
  }
  const std::vector<DeviceCapability> devices = detect_hip_devices();
  if (static_cast<int>(devices.size()) != count) {
    raise(ErrorCategory::device,
          "the HIP runtime could not describe device " + std::to_string(device_index) + " (" + context + ")");
  }
  return devices[static_cast<std::size_t>(device_index)];
}

class HipQueue final : public QueueImpl {
 public:
  explicit HipQueue(int device_index) : device_(device_index), capability_(capability_of(device_index)) {
    DeviceGuard guard(device_, context());
    // Non-blocking: the queue must not serialise with work on the null stream.
    check(hipStreamCreateWithFlags(&stream_, hipStreamNonBlocking), "hipStreamCreateWithFlags", context());
  }

  ~HipQueue() override {
    // Work still in flight finishes; buffers of this queue keep it alive, so
    // nothing the stream uses is freed before this point.
    (void)hipStreamSynchronize(stream_);
    (void)hipStreamDestroy(stream_);
  }
  HipQueue(const HipQueue&) = delete;
  HipQueue& operator=(const HipQueue&) = delete;

  DeviceBackend backend() const override { return DeviceBackend::hip; }
  int device_index() const override { return device_; }
  const DeviceCapability& capability() const override { return capability_; }
  void* native_stream() const override { return static_cast<void*>(stream_); }

  // Kernels read device, pinned-host and managed memory through the queue's
  // allocations; plain pageable host memory is reachable only with HMM and
  // xnack+, which we cannot assume, so host is refused.
  bool can_access(MemoryKind kind) const override { return kind != MemoryKind::host; }

  void* allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0) return nullptr;
    const std::string what =
        context(std::to_string(bytes) + " bytes of " + std::string(memory_kind_name(kind)) + " memory");
    DeviceGuard guard(device_, what);
    void* ptr = nullptr;
    switch (kind) {
      case MemoryKind::device: check(hipMalloc(&ptr, bytes), "hipMalloc", what); break;
      case MemoryKind::host: check(hipHostMalloc(&ptr, bytes, hipHostMallocDefault), "hipHostMalloc", what); break;
      case MemoryKind::shared:
        check(hipMallocManaged(&ptr, bytes, hipMemAttachGlobal), "hipMallocManaged", what);
        break;
    }
    return ptr;
  }

  void deallocate(void* ptr, MemoryKind kind) noexcept override {
    if (ptr == nullptr) return;
    int previous = 0;
    const bool switched =
        hipGetDevice(&previous) == hipSuccess && previous != device_ && hipSetDevice(device_) == hipSuccess;
    const hipError_t code = kind == MemoryKind::host ? hipHostFree(ptr) : hipFree(ptr);
    if (code != hipSuccess) {
      (void)hipGetLastError();
      // A destructor path: report, never throw.
      try {
        log(LogLevel::warn, std::string(kind == MemoryKind::host ? "hipHostFree" : "hipFree") +
                                " failed: " + hipGetErrorString(code) + " (" + context() + ")");
      } catch (...) {
      }
    }
    if (switched) (void)hipSetDevice(previous);
  }

  void memcpy(void* dst, const void* src, std::size_t bytes) override {
    // hipMemcpyDefault: unified addressing tells the direction from the pointers.
    check(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, stream_), "hipMemcpyAsync",
          context(std::to_string(bytes) + " bytes"));
  }

  void memset(void* dst, int value, std::size_t bytes) override {
    const std::string what = context(std::to_string(bytes) + " bytes");
    if (is_host_pointer(dst, what)) {
      // hipMemsetAsync is for device memory; keep the queue's order by
      // finishing earlier work first, then set host memory here.
      check(hipStreamSynchronize(stream_), "hipStreamSynchronize", what);
      std::memset(dst, value, bytes);
      return;
    }
    check(hipMemsetAsync(dst, value, bytes, stream_), "hipMemsetAsync", what);
  }

  std::shared_ptr<EventImpl> record() override { return std::make_shared<HipEvent>(device_, stream_); }

  void wait() override { check(hipStreamSynchronize(stream_), "hipStreamSynchronize", context()); }

 private:
  std::string context(const std::string& detail = {}) const {
    std::string text = "HIP queue on device " + std::to_string(device_);
    if (!detail.empty()) text += ", " + detail;
    return text;
  }

  // Pageable memory the runtime never saw makes hipPointerGetAttributes fail
  // with hipErrorInvalidValue (HIP 5.x); that, like pinned host memory, is host.
  static bool is_host_pointer(const void* ptr, const std::string& what) {
    hipPointerAttribute_t attributes{};
    const hipError_t code = hipPointerGetAttributes(&attributes, ptr);
    if (code == hipErrorInvalidValue) {
      (void)hipGetLastError();
      return true;
    }
    check(code, "hipPointerGetAttributes", what);
    return attributes.memoryType == hipMemoryTypeHost && !attributes.isManaged;
  }

  int device_;
  DeviceCapability capability_;
  hipStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<QueueImpl> make_hip_queue(int device_index) { return std::make_shared<HipQueue>(device_index); }

}  // namespace mla::detail
