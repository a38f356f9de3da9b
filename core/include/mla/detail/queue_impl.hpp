// Internal: what a vendor runtime implements behind mla::Queue. Not part of the
// public API; the host queue (core/src/queue.cpp) and the GPU queue
// (backends/cuda_hip/gpu_queue.cu, compiled once per vendor) derive from it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "mla/queue.hpp"

namespace mla::detail {

class EventImpl {
 public:
  virtual ~EventImpl() = default;
  virtual void wait() = 0;
  virtual double elapsed_ms_since(EventImpl& start) = 0;
};

class QueueImpl {
 public:
  virtual ~QueueImpl() = default;
  virtual DeviceBackend backend() const = 0;
  virtual int device_index() const = 0;
  virtual const DeviceCapability& capability() const = 0;
  virtual void* native_stream() const = 0;
  virtual bool owns_stream() const { return true; }
  virtual bool can_access(MemoryKind kind) const = 0;
  virtual void* allocate(std::size_t bytes, MemoryKind kind) = 0;
  virtual void deallocate(void* ptr, MemoryKind kind) noexcept = 0;
  virtual void memcpy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void memset(void* dst, int value, std::size_t bytes) = 0;
  virtual std::shared_ptr<EventImpl> record() = 0;
  virtual void wait() = 0;
  // Later work waits for `event` (of a queue on the same device). The
  // default blocks the host until it is done, which is right for queues
  // whose work runs on the calling thread.
  virtual void wait_for(EventImpl& event) { event.wait(); }
};

std::shared_ptr<QueueImpl> make_host_queue();

// The vendor queues. Core is vendor-neutral and does not know which vendor a
// build carries, so these three are defined by the backends layer
// (backends/vendor_queues.cpp), the one place that composes the build.
// Whether this build has a queue for `backend` (cuda or hip).
bool vendor_queue_built(DeviceBackend backend);
// A queue on device `device_index` of `backend`; raises Error(not_supported)
// when the build has none.
std::shared_ptr<QueueImpl> make_vendor_queue(DeviceBackend backend, int device_index);
// A queue over the caller's `stream` of that device, which it does not own.
std::shared_ptr<QueueImpl> borrow_vendor_queue(DeviceBackend backend, int device_index, void* stream);
// The vendor a default queue runs on: the built one when it sees a device.
std::optional<DeviceBackend> default_vendor_queue();

}  // namespace mla::detail
