// mla::Queue on a GPU: one non-blocking stream per queue, USM-style
// allocations, and events with timing. One source for both vendors: the CUDA
// build compiles it as CUDA (make_cuda_queue), the HIP build as HIP with
// MLA_HIP_COMPILE (make_hip_queue); gpu_runtime.hpp maps each call to the
// vendor runtime. Every runtime call is checked and a failure becomes
// Error(device) naming the call, the runtime's message and what the queue was
// doing; destructors report nothing and never throw.
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gpu_queue.hpp"
#include "gpu_runtime.hpp"
#include "mla/config.hpp"
#include "mla/detail/vendor_devices.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"

namespace mla::detail {
namespace {

std::vector<DeviceCapability> detect_devices() {
#if defined(MLA_HIP_COMPILE)
  return detect_hip_devices();
#else
  return detect_cuda_devices();
#endif
}

class GpuEvent final : public EventImpl {
 public:
  GpuEvent(int device, gpu::Stream stream) : device_(device) {
    gpu::DeviceGuard guard(device_, context());
    event_ = gpu::record_event(stream, context());
  }
  ~GpuEvent() override { gpu::destroy_event(event_); }
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;

  void wait() override { gpu::synchronize(event_, context()); }
  gpu::Event native() const { return event_; }

  double elapsed_ms_since(EventImpl& start) override {
    auto* begin = dynamic_cast<GpuEvent*>(&start);
    if (begin == nullptr || begin->device_ != device_) {
      raise(ErrorCategory::invalid_argument, "Event::elapsed_ms between events of different queues");
    }
    wait();
    return static_cast<double>(gpu::elapsed_ms(begin->event_, event_, context()));
  }

 private:
  std::string context() const {
    return "event on " + std::string(gpu::vendor_name) + " device " + std::to_string(device_);
  }

  int device_;
  gpu::Event event_ = nullptr;
};

DeviceCapability capability_of(int device_index) {
  const std::string vendor(gpu::vendor_name);
  const std::string context = "creating a " + vendor + " queue on device " + std::to_string(device_index);
  const int count = gpu::device_count(context);
  if (device_index < 0 || device_index >= count) {
    raise(ErrorCategory::device,
          "no " + vendor + " device " + std::to_string(device_index) + ": this machine has " + std::to_string(count));
  }
  const std::vector<DeviceCapability> devices = detect_devices();
  if (static_cast<int>(devices.size()) != count) {
    raise(ErrorCategory::device, "the " + vendor + " runtime could not describe device " +
                                     std::to_string(device_index) + " (" + context + ")");
  }
  return devices[static_cast<std::size_t>(device_index)];
}

class GpuQueue final : public QueueImpl {
 public:
  explicit GpuQueue(int device_index) : device_(device_index), capability_(capability_of(device_index)) {
    gpu::DeviceGuard guard(device_, context());
    stream_ = gpu::create_stream(context());
  }

  // Over the caller's stream, which stays the caller's to destroy.
  GpuQueue(int device_index, gpu::Stream borrowed)
      : device_(device_index), capability_(capability_of(device_index)), stream_(borrowed), owns_stream_(false) {}

  // Work still in flight finishes; buffers of this queue keep it alive, so
  // nothing the stream uses is freed before this point.
  ~GpuQueue() override {
    if (owns_stream_) gpu::destroy_stream(stream_);
  }
  GpuQueue(const GpuQueue&) = delete;
  GpuQueue& operator=(const GpuQueue&) = delete;

  DeviceBackend backend() const override { return gpu::backend; }
  int device_index() const override { return device_; }
  const DeviceCapability& capability() const override { return capability_; }
  void* native_stream() const override { return static_cast<void*>(stream_); }
  bool owns_stream() const override { return owns_stream_; }

  // Kernels read device, pinned-host and managed memory through the queue's
  // allocations; plain pageable host memory is reachable from a kernel only on
  // some systems (HMM, or xnack+ on AMD), which we cannot assume, so host is
  // refused.
  bool can_access(MemoryKind kind) const override { return kind != MemoryKind::host; }

  void* allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0) return nullptr;
    const std::string what =
        context(std::to_string(bytes) + " bytes of " + std::string(memory_kind_name(kind)) + " memory");
    gpu::DeviceGuard guard(device_, what);
    return gpu::allocate(bytes, kind, what);
  }

  void deallocate(void* ptr, MemoryKind kind) noexcept override {
    if (ptr == nullptr) return;
    gpu::DeviceGuard guard(device_, std::nothrow);
    const std::string failure = gpu::free_quietly(ptr, kind);
    if (failure.empty()) return;
    // A destructor path: report, never throw.
    try {
      log(LogLevel::warn, failure + " (" + context() + ")");
    } catch (...) {
    }
  }

  // Every operation on the stream runs with the queue's device current: a
  // borrowed null stream (PyTorch's default) means the current device's.
  void memcpy(void* dst, const void* src, std::size_t bytes) override {
    const std::string what = context(std::to_string(bytes) + " bytes");
    gpu::DeviceGuard guard(device_, what);
    // The default direction: unified addressing tells it from the pointers.
    gpu::memcpy_async(dst, src, bytes, stream_, what);
  }

  void memset(void* dst, int value, std::size_t bytes) override {
    const std::string what = context(std::to_string(bytes) + " bytes");
    gpu::DeviceGuard guard(device_, what);
    if (gpu::is_host_memory(dst, what)) {
      // The runtime's async memset is for device memory; keep the queue's
      // order by finishing earlier work first, then set host memory here.
      gpu::synchronize(stream_, what);
      std::memset(dst, value, bytes);
      return;
    }
    gpu::memset_async(dst, value, bytes, stream_, what);
  }

  std::shared_ptr<EventImpl> record() override { return std::make_shared<GpuEvent>(device_, stream_); }

  void wait() override {
    const std::string what = context();
    gpu::DeviceGuard guard(device_, what);
    gpu::synchronize(stream_, what);
  }

  void wait_for(EventImpl& event) override {
    auto* gpu_event = dynamic_cast<GpuEvent*>(&event);
    if (gpu_event == nullptr) {
      event.wait();  // an event of the host queue: its work is already done
      return;
    }
    const std::string what = context("waiting for an event");
    gpu::DeviceGuard guard(device_, what);
    gpu::stream_wait(stream_, gpu_event->native(), what);
  }

 private:
  std::string context(const std::string& detail = {}) const {
    std::string text = std::string(gpu::vendor_name) + (owns_stream_ ? "" : " borrowed-stream") + " queue on device " +
                       std::to_string(device_);
    if (!detail.empty()) text += ", " + detail;
    return text;
  }

  int device_;
  DeviceCapability capability_;
  gpu::Stream stream_ = nullptr;
  bool owns_stream_ = true;
};

}  // namespace

#if defined(MLA_HIP_COMPILE)
std::shared_ptr<QueueImpl> make_hip_queue(int device_index) { return std::make_shared<GpuQueue>(device_index); }
std::shared_ptr<QueueImpl> borrow_hip_queue(int device_index, void* stream) {
  return std::make_shared<GpuQueue>(device_index, static_cast<gpu::Stream>(stream));
}
#else
std::shared_ptr<QueueImpl> make_cuda_queue(int device_index) { return std::make_shared<GpuQueue>(device_index); }
std::shared_ptr<QueueImpl> borrow_cuda_queue(int device_index, void* stream) {
  return std::make_shared<GpuQueue>(device_index, static_cast<gpu::Stream>(stream));
}
#endif

}  // namespace mla::detail
