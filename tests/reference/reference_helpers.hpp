// Small helpers of the REFERENCE tests: a backend built from the library's own
// entry, host tensors filled with given values, and a queue that pretends to
// be a GPU (host memory it cannot read) for the error paths.
#pragma once

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "builtin_entries.hpp"
#include "conformance/test_tensors.hpp"
#include "mla/detail/queue_impl.hpp"

namespace mla::testing {

inline std::unique_ptr<PrefillBackend> make_reference(const BackendParams& params) {
  return detail::reference_backend_entry().factory(params);
}

inline BackendParams tiny_params(MlaDims dims, int heads = 1, DType dtype = DType::float32) {
  BackendParams params;
  params.num_heads = heads;
  params.dims = dims;
  params.dtype = dtype;
  return params;
}

// A contiguous float32 tensor holding `values` in row-major order.
inline HostTensor tensor_of(std::vector<std::int64_t> shape, std::initializer_list<float> values,
                            DType dtype = DType::float32) {
  HostTensor tensor(dtype, std::move(shape));
  std::int64_t i = 0;
  for (float value : values) store_from_float(tensor.storage(), dtype, i++, value);
  return tensor;
}

// Reports itself as a CUDA device and cannot read host memory; its
// allocations are ordinary host memory, so tests can still fill them.
class FakeGpuQueue final : public detail::QueueImpl {
 public:
  FakeGpuQueue() {
    capability_.vendor = Vendor::nvidia;
    capability_.major = 9;
    capability_.arch = "sm_90";
    capability_.name = "simulated test GPU";
    capability_.simulated = true;
  }
  DeviceBackend backend() const override { return DeviceBackend::cuda; }
  int device_index() const override { return 0; }
  const DeviceCapability& capability() const override { return capability_; }
  void* native_stream() const override { return nullptr; }
  bool can_access(MemoryKind kind) const override { return kind != MemoryKind::host; }
  void* allocate(std::size_t bytes, MemoryKind) override { return bytes ? std::malloc(bytes) : nullptr; }
  void deallocate(void* ptr, MemoryKind) noexcept override { std::free(ptr); }
  void memcpy(void* dst, const void* src, std::size_t bytes) override { std::memmove(dst, src, bytes); }
  void memset(void* dst, int value, std::size_t bytes) override { std::memset(dst, value, bytes); }
  std::shared_ptr<detail::EventImpl> record() override { return nullptr; }
  void wait() override {}

 private:
  DeviceCapability capability_;
};

inline Queue fake_gpu_queue() { return Queue(std::make_shared<FakeGpuQueue>()); }

}  // namespace mla::testing
