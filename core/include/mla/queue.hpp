// Devices and the SYCL-style abstraction over them: the vocabulary of devices
// (vendor, capability, AMD gfx names; plain data and pure functions: which
// device this machine has is mla/platform.hpp's job), a queue bound to one
// device, USM allocations, copies and events. Tests, benchmarks, the command
// and every backend move tensors only through it, so one code path serves
// host, CUDA and HIP.
//
//   mla::Queue q = mla::Queue::default_queue();
//   mla::UsmBuffer dq = mla::UsmBuffer::device(q, bytes);
//   q.memcpy(dq.get(), host_ptr, bytes);
//   mla::Event t0 = q.record();  ...  mla::Event t1 = q.record();
//   q.wait();  double ms = mla::Event::elapsed_ms(t0, t1);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "mla/tensor.hpp"

namespace mla {

enum class Vendor { nvidia, amd, host };

// "nvidia", "amd", "host".
std::string_view vendor_name(Vendor vendor);

struct DeviceCapability {
  Vendor vendor = Vendor::host;
  int major = 0;  // NVIDIA: compute capability; AMD: from the gfx name (docs/contract.md §11)
  int minor = 0;
  bool capability_known = true;               // false when a GPU's arch could not be read
  std::string arch = "host";                  // "sm_90", "gfx90a", "host"
  std::string name = "host";                  // marketing name from the runtime, or "simulated ..."
  int multiprocessors = 0;                    // SMs or CUs
  int warp_size = 1;                          // 32 on NVIDIA, 64 on gfx9, 32 on gfx1x
  std::uint64_t memory_bytes = 0;             // global memory
  std::uint64_t shared_memory_per_block = 0;  // shared memory / LDS per block
  bool simulated = false;                     // came from MLA_PLATFORM, not from a runtime

  // major * 10 + minor, vLLM's to_int(): 90 for 9.0, 100 for 10.0.
  int as_int() const { return major * 10 + minor; }
  // "9.0"; "unknown" when not known; "host" on the host.
  std::string capability_string() const;
  // "nvidia sm_90 (capability 9.0)", "amd gfx90a (capability 9.0)", "host"
  std::string describe() const;
};

// Strips feature suffixes: "gfx90a:sramecc+:xnack-" -> "gfx90a".
std::string strip_amd_features(std::string_view gcn_arch_name);

// gfx90a -> (9, 0), gfx942 -> (9, 4), gfx1100 -> (11, 0); nullopt when the
// name is not gfx followed by 2-4 hex-ish digits.
std::optional<std::pair<int, int>> amd_arch_capability(std::string_view arch);

// The host platform (vendor host, capability known, arch "host").
DeviceCapability host_capability();

enum class DeviceBackend { host, cuda, hip };

std::string_view device_backend_name(DeviceBackend backend);

// True when this build can create queues of `backend` (host always).
bool device_backend_built(DeviceBackend backend);

namespace detail {
class QueueImpl;
class EventImpl;
}  // namespace detail

// A point in a queue's stream of work, for timing.
class Event {
 public:
  Event() = default;
  // Milliseconds between two events of the same queue; waits for `end`.
  static double elapsed_ms(const Event& start, const Event& end);
  // Blocks until the work before the event is done.
  void wait() const;

  explicit Event(std::shared_ptr<detail::EventImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<detail::EventImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::EventImpl> impl_;
};

// Where a queue's memory comes from. An engine that owns its device memory (a
// caching allocator, a pool) gives the library one through
// Queue::with_allocator; every allocation the library then makes on that
// queue goes through it. Implementations must be thread-safe when the queue
// is used from several threads.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // `bytes` (> 0) of `kind` memory the queue's device can use. Returns
  // nullptr or throws on failure; the queue turns nullptr into Error(device).
  virtual void* allocate(std::size_t bytes, MemoryKind kind) = 0;
  // Frees what allocate returned, with the same kind. Work on the queue may
  // still be reading it, as with cudaFree (which waits for the device): an
  // allocator that reuses memory at once must order the reuse after the
  // queue's work, e.g. as a stream-ordered pool does.
  virtual void deallocate(void* ptr, MemoryKind kind) noexcept = 0;
};

// A handle to an in-order queue on one device; copies share the same queue.
class Queue {
 public:
  // The host queue: work runs on the calling thread (Kokkos backends run on
  // Kokkos' default host execution space from it).
  static Queue host();
  // A queue on GPU `device_index` of `backend`. Raises Error(not_supported) when
  // the build lacks that backend and Error(device) when no such device exists.
  Queue(DeviceBackend backend, int device_index = 0);
  // The first GPU this build can use, else the host queue.
  static Queue default_queue();
  // A queue on the caller's stream (a cudaStream_t / hipStream_t of GPU
  // `device_index`, as void*; nullptr is the device's legacy default
  // stream). Work is enqueued on it in order with the caller's own, which
  // is what CUDA-graph capture on an engine's stream needs. The queue never
  // creates, destroys or synchronises the stream except when asked to
  // (wait(), Event::wait / elapsed_ms, a memset of host memory). Raises
  // Error(invalid_argument) for the host backend, and as Queue(backend,
  // device_index) does when the build or the machine lacks the device.
  static Queue borrow(DeviceBackend backend, int device_index, void* stream);

  DeviceBackend backend() const;
  int device_index() const;
  const DeviceCapability& capability() const;
  // cudaStream_t / hipStream_t as void*, nullptr on the host queue.
  void* native_stream() const;
  // False for a queue made by borrow(): the stream is the caller's.
  bool owns_stream() const;
  // Memory kind a kernel of this queue can read directly.
  bool can_access(MemoryKind kind) const;

  // The same queue (stream, device, order) with allocations from `allocator`
  // (not null). Buffers allocated before keep freeing through their own.
  Queue with_allocator(std::shared_ptr<Allocator> allocator) const;
  // What this queue allocates with: the vendor runtime (or the host heap) by
  // default, or what with_allocator was given. An Allocator that wraps
  // another, e.g. to count, starts from this.
  std::shared_ptr<Allocator> allocator() const;

  void* malloc_device(std::size_t bytes);
  void* malloc_host(std::size_t bytes);
  void* malloc_shared(std::size_t bytes);
  void free(void* ptr, MemoryKind kind);

  // In-order, asynchronous with respect to the host on GPU queues. Works in any
  // direction between host, device and shared memory.
  void memcpy(void* dst, const void* src, std::size_t bytes);
  void memset(void* dst, int value, std::size_t bytes);

  Event record();
  // Work submitted after this call waits for `event` (recorded on any queue
  // of the same device): a stream-to-stream dependency on GPU queues, with no
  // wait on the host.
  void wait_for(const Event& event);
  // Blocks until everything submitted so far is done; raises Error(device) on
  // a failure reported by the runtime.
  void wait();

  std::string describe() const;

  explicit Queue(std::shared_ptr<detail::QueueImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<detail::QueueImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::QueueImpl> impl_;
};

// RAII owner of one USM allocation. Move-only; keeps its queue alive.
class UsmBuffer {
 public:
  UsmBuffer() = default;
  static UsmBuffer device(Queue& queue, std::size_t bytes);
  static UsmBuffer host(Queue& queue, std::size_t bytes);
  static UsmBuffer shared(Queue& queue, std::size_t bytes);
  ~UsmBuffer();
  UsmBuffer(UsmBuffer&& other) noexcept;
  UsmBuffer& operator=(UsmBuffer&& other) noexcept;
  UsmBuffer(const UsmBuffer&) = delete;
  UsmBuffer& operator=(const UsmBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  UsmBuffer(std::shared_ptr<detail::QueueImpl> queue, void* ptr, std::size_t bytes, MemoryKind kind)
      : queue_(std::move(queue)), ptr_(ptr), bytes_(bytes), kind_(kind) {}
  void reset();

  std::shared_ptr<detail::QueueImpl> queue_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::device;
};

// A tensor with its own storage: a UsmBuffer plus a contiguous view of it.
struct OwnedTensor {
  UsmBuffer buffer;
  TensorView view;

  static OwnedTensor device(Queue& queue, DType dtype, std::initializer_list<std::int64_t> shape);
  static OwnedTensor host(Queue& queue, DType dtype, std::initializer_list<std::int64_t> shape);
};

}  // namespace mla
