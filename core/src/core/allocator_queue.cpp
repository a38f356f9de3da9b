// Queue::with_allocator: a queue that forwards everything to the queue it
// wraps except where memory comes from.
#include <fmt/format.h>

#include <memory>

#include "mla/detail/queue_impl.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

// The queue's own allocations (vendor runtime or host heap) as an Allocator.
class RuntimeAllocator final : public Allocator {
 public:
  explicit RuntimeAllocator(std::shared_ptr<detail::QueueImpl> queue) : queue_(std::move(queue)) {}
  void* allocate(std::size_t bytes, MemoryKind kind) override { return queue_->allocate(bytes, kind); }
  void deallocate(void* ptr, MemoryKind kind) noexcept override { queue_->deallocate(ptr, kind); }

 private:
  std::shared_ptr<detail::QueueImpl> queue_;
};

class AllocatorQueue final : public detail::QueueImpl {
 public:
  AllocatorQueue(std::shared_ptr<detail::QueueImpl> inner, std::shared_ptr<Allocator> allocator)
      : inner_(std::move(inner)), allocator_(std::move(allocator)) {}

  DeviceBackend backend() const override { return inner_->backend(); }
  int device_index() const override { return inner_->device_index(); }
  const DeviceCapability& capability() const override { return inner_->capability(); }
  void* native_stream() const override { return inner_->native_stream(); }
  bool owns_stream() const override { return inner_->owns_stream(); }
  bool can_access(MemoryKind kind) const override { return inner_->can_access(kind); }
  void* allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0) return nullptr;
    void* ptr = allocator_->allocate(bytes, kind);
    if (ptr == nullptr) {
      raise(ErrorCategory::device, fmt::format("the queue's allocator returned no memory for {} bytes of {} memory",
                                               bytes, memory_kind_name(kind)));
    }
    return ptr;
  }
  void deallocate(void* ptr, MemoryKind kind) noexcept override {
    if (ptr != nullptr) allocator_->deallocate(ptr, kind);
  }
  void memcpy(void* dst, const void* src, std::size_t bytes) override { inner_->memcpy(dst, src, bytes); }
  void memset(void* dst, int value, std::size_t bytes) override { inner_->memset(dst, value, bytes); }
  std::shared_ptr<detail::EventImpl> record() override { return inner_->record(); }
  void wait() override { inner_->wait(); }
  void wait_for(detail::EventImpl& event) override { inner_->wait_for(event); }

  const std::shared_ptr<detail::QueueImpl>& inner() const { return inner_; }
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }

 private:
  std::shared_ptr<detail::QueueImpl> inner_;
  std::shared_ptr<Allocator> allocator_;
};

}  // namespace

Queue Queue::with_allocator(std::shared_ptr<Allocator> allocator) const {
  if (!allocator) raise(ErrorCategory::invalid_argument, "Queue::with_allocator: the allocator is null");
  if (!impl_) raise(ErrorCategory::invalid_argument, "use of a moved-from or empty mla::Queue");
  // Wrap the queue itself, never a wrapper, so allocators do not stack.
  std::shared_ptr<detail::QueueImpl> inner = impl_;
  if (const auto* wrapped = dynamic_cast<const AllocatorQueue*>(impl_.get())) inner = wrapped->inner();
  return Queue(std::make_shared<AllocatorQueue>(std::move(inner), std::move(allocator)));
}

std::shared_ptr<Allocator> Queue::allocator() const {
  if (!impl_) raise(ErrorCategory::invalid_argument, "use of a moved-from or empty mla::Queue");
  if (const auto* wrapped = dynamic_cast<const AllocatorQueue*>(impl_.get())) return wrapped->allocator();
  return std::make_shared<RuntimeAllocator>(impl_);
}

}  // namespace mla
