// The host queue: work runs on the calling thread, so every operation is
// complete when it returns and events are plain timestamps.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "mla/detail/queue_impl.hpp"
#include "mla/error.hpp"

namespace mla::detail {

namespace {

// 64 bytes: a cache line and the widest vector register, so kernels may use aligned loads.
constexpr std::size_t host_alignment = 64;

class HostEvent final : public EventImpl {
 public:
  HostEvent() : time_(std::chrono::steady_clock::now()) {}
  void wait() override {}
  double elapsed_ms_since(EventImpl& start) override {
    auto* begin = dynamic_cast<HostEvent*>(&start);
    if (begin == nullptr)
      raise(ErrorCategory::invalid_argument, "Event::elapsed_ms between events of different queues");
    return std::chrono::duration<double, std::milli>(time_ - begin->time_).count();
  }

 private:
  std::chrono::steady_clock::time_point time_;
};

class HostQueue final : public QueueImpl {
 public:
  HostQueue() : capability_(host_capability()) {}
  DeviceBackend backend() const override { return DeviceBackend::host; }
  int device_index() const override { return 0; }
  const DeviceCapability& capability() const override { return capability_; }
  void* native_stream() const override { return nullptr; }
  bool can_access(MemoryKind) const override { return true; }

  void* allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0) return nullptr;
    const std::size_t rounded = (bytes + host_alignment - 1) / host_alignment * host_alignment;
    void* ptr = std::aligned_alloc(host_alignment, rounded);
    if (ptr == nullptr) {
      raise(ErrorCategory::device,
            fmt::format("host allocation of {} bytes ({} memory) failed", bytes, memory_kind_name(kind)));
    }
    return ptr;
  }
  void deallocate(void* ptr, MemoryKind) noexcept override { std::free(ptr); }
  void memcpy(void* dst, const void* src, std::size_t bytes) override { std::memmove(dst, src, bytes); }
  void memset(void* dst, int value, std::size_t bytes) override { std::memset(dst, value, bytes); }
  std::shared_ptr<EventImpl> record() override { return std::make_shared<HostEvent>(); }
  void wait() override {}

 private:
  DeviceCapability capability_;
};

}  // namespace

std::shared_ptr<QueueImpl> make_host_queue() { return std::make_shared<HostQueue>(); }

}  // namespace mla::detail
