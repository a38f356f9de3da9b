// A backend as Python holds it: the library's backend, the queue it was made
// for, and a lock, so that Python threads sharing one backend take turns (a
// backend keeps the prepared step between calls).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>

#include "mla/backend.hpp"

namespace mla::python {

class BackendObject {
 public:
  BackendObject(std::unique_ptr<PrefillBackend> backend, Queue queue)
      : backend_(std::move(backend)), queue_(std::move(queue)) {}

  PrefillBackend& backend() { return *backend_; }
  const PrefillBackend& backend() const { return *backend_; }
  const Queue& queue() const { return queue_; }
  std::mutex& mutex() { return mutex_; }

  // The queue a call runs on: the backend's own, or, when the caller names a
  // stream (an int, e.g. PyTorch's current stream) and the queue is a GPU
  // queue, a queue borrowing that stream on the same device.
  Queue queue_for(pybind11::handle stream) const {
    if (stream.is_none() || queue_.backend() == DeviceBackend::host) return queue_;
    const auto handle = stream.cast<std::uintptr_t>();
    return Queue::borrow(queue_.backend(), queue_.device_index(), reinterpret_cast<void*>(handle));
  }

 private:
  std::unique_ptr<PrefillBackend> backend_;
  Queue queue_;
  std::mutex mutex_;
};

}  // namespace mla::python
