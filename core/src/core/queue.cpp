#include "mla/queue.hpp"

#include <fmt/format.h>

#include <optional>

#include "mla/detail/queue_impl.hpp"
#include "mla/error.hpp"

namespace mla {

std::string_view device_backend_name(DeviceBackend backend) {
  switch (backend) {
    case DeviceBackend::host:
      return "host";
    case DeviceBackend::cuda:
      return "cuda";
    case DeviceBackend::hip:
      return "hip";
  }
  return "unknown";
}

bool device_backend_built(DeviceBackend backend) {
  return backend == DeviceBackend::host || detail::vendor_queue_built(backend);
}

namespace {

void require_built(DeviceBackend backend) {
  if (!device_backend_built(backend)) {
    raise(ErrorCategory::not_supported,
          fmt::format("cannot create a {} queue: this build of mlaprefill was configured without {} "
                      "(use the {} preset)",
                      device_backend_name(backend), backend == DeviceBackend::cuda ? "CUDA" : "HIP",
                      device_backend_name(backend)));
  }
}

std::shared_ptr<detail::QueueImpl> make_queue(DeviceBackend backend, int device_index) {
  require_built(backend);
  if (backend == DeviceBackend::host) return detail::make_host_queue();
  return detail::make_vendor_queue(backend, device_index);
}

const std::shared_ptr<detail::QueueImpl>& checked(const std::shared_ptr<detail::QueueImpl>& impl) {
  if (!impl) raise(ErrorCategory::invalid_argument, "use of a moved-from or empty mla::Queue");
  return impl;
}

}  // namespace

Queue Queue::host() { return Queue(detail::make_host_queue()); }

Queue::Queue(DeviceBackend backend, int device_index) : impl_(make_queue(backend, device_index)) {}

Queue Queue::default_queue() {
  if (const std::optional<DeviceBackend> gpu = detail::default_vendor_queue()) return Queue(*gpu, 0);
  return host();
}

Queue Queue::borrow(DeviceBackend backend, int device_index, void* stream) {
  if (backend == DeviceBackend::host) {
    raise(ErrorCategory::invalid_argument, "Queue::borrow: the host queue has no stream to borrow; use Queue::host()");
  }
  require_built(backend);
  return Queue(detail::borrow_vendor_queue(backend, device_index, stream));
}

DeviceBackend Queue::backend() const { return checked(impl_)->backend(); }
int Queue::device_index() const { return checked(impl_)->device_index(); }
const DeviceCapability& Queue::capability() const { return checked(impl_)->capability(); }
void* Queue::native_stream() const { return checked(impl_)->native_stream(); }
bool Queue::owns_stream() const { return checked(impl_)->owns_stream(); }
bool Queue::can_access(MemoryKind kind) const { return checked(impl_)->can_access(kind); }

void* Queue::malloc_device(std::size_t bytes) { return checked(impl_)->allocate(bytes, MemoryKind::device); }
void* Queue::malloc_host(std::size_t bytes) { return checked(impl_)->allocate(bytes, MemoryKind::host); }
void* Queue::malloc_shared(std::size_t bytes) { return checked(impl_)->allocate(bytes, MemoryKind::shared); }
void Queue::free(void* ptr, MemoryKind kind) { checked(impl_)->deallocate(ptr, kind); }

void Queue::memcpy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    raise(ErrorCategory::invalid_argument, fmt::format("Queue::memcpy of {} bytes with a null pointer", bytes));
  }
  checked(impl_)->memcpy(dst, src, bytes);
}

void Queue::memset(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst == nullptr)
    raise(ErrorCategory::invalid_argument, fmt::format("Queue::memset of {} bytes with a null pointer", bytes));
  checked(impl_)->memset(dst, value, bytes);
}

Event Queue::record() { return Event(checked(impl_)->record()); }

void Queue::wait_for(const Event& event) {
  if (!event.impl()) raise(ErrorCategory::invalid_argument, "Queue::wait_for on an event that was never recorded");
  checked(impl_)->wait_for(*event.impl());
}
void Queue::wait() { checked(impl_)->wait(); }

std::string Queue::describe() const {
  const auto& impl = checked(impl_);
  if (impl->backend() == DeviceBackend::host) return "host queue";
  return fmt::format("{} queue on device {} ({}){}", device_backend_name(impl->backend()), impl->device_index(),
                     impl->capability().describe(), impl->owns_stream() ? "" : ", on a borrowed stream");
}

double Event::elapsed_ms(const Event& start, const Event& end) {
  if (!start.impl_ || !end.impl_)
    raise(ErrorCategory::invalid_argument, "Event::elapsed_ms on an event that was never recorded");
  return end.impl_->elapsed_ms_since(*start.impl_);
}

void Event::wait() const {
  if (!impl_) raise(ErrorCategory::invalid_argument, "Event::wait on an event that was never recorded");
  impl_->wait();
}

UsmBuffer UsmBuffer::device(Queue& queue, std::size_t bytes) {
  return UsmBuffer(queue.impl(), bytes ? queue.malloc_device(bytes) : nullptr, bytes, MemoryKind::device);
}
UsmBuffer UsmBuffer::host(Queue& queue, std::size_t bytes) {
  return UsmBuffer(queue.impl(), bytes ? queue.malloc_host(bytes) : nullptr, bytes, MemoryKind::host);
}
UsmBuffer UsmBuffer::shared(Queue& queue, std::size_t bytes) {
  return UsmBuffer(queue.impl(), bytes ? queue.malloc_shared(bytes) : nullptr, bytes, MemoryKind::shared);
}

UsmBuffer::~UsmBuffer() { reset(); }

UsmBuffer::UsmBuffer(UsmBuffer&& other) noexcept
    : queue_(std::move(other.queue_)), ptr_(other.ptr_), bytes_(other.bytes_), kind_(other.kind_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
}

UsmBuffer& UsmBuffer::operator=(UsmBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    queue_ = std::move(other.queue_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    kind_ = other.kind_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void UsmBuffer::reset() {
  if (ptr_ != nullptr && queue_) queue_->deallocate(ptr_, kind_);
  ptr_ = nullptr;
  bytes_ = 0;
  queue_.reset();
}

namespace {

std::size_t checked_bytes(DType dtype, std::initializer_list<std::int64_t> shape) {
  std::size_t n = 1;
  for (std::int64_t extent : shape) {
    if (extent < 0) raise(ErrorCategory::invalid_argument, fmt::format("negative tensor extent {}", extent));
    n *= static_cast<std::size_t>(extent);
  }
  return n * dtype_size(dtype);
}

}  // namespace

OwnedTensor OwnedTensor::device(Queue& queue, DType dtype, std::initializer_list<std::int64_t> shape) {
  OwnedTensor t;
  t.buffer = UsmBuffer::device(queue, checked_bytes(dtype, shape));
  t.view = TensorView::contiguous(t.buffer.get(), dtype, shape, MemoryKind::device);
  return t;
}

OwnedTensor OwnedTensor::host(Queue& queue, DType dtype, std::initializer_list<std::int64_t> shape) {
  OwnedTensor t;
  t.buffer = UsmBuffer::host(queue, checked_bytes(dtype, shape));
  t.view = TensorView::contiguous(t.buffer.get(), dtype, shape, MemoryKind::host);
  return t;
}

}  // namespace mla
