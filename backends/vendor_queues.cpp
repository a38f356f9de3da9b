// The vendor queues core's mla::Queue asks for (mla/detail/queue_impl.hpp).
// This layer composes the build, so it alone knows whether the CUDA or the
// HIP queue was compiled in (MLA_WITH_CUDA / MLA_WITH_HIP, private to the
// backends' targets).
#include <memory>
#include <optional>
#include <string>

#include "mla/detail/queue_impl.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"
#if MLA_WITH_CUDA || MLA_WITH_HIP
#include "cuda_hip/gpu_queue.hpp"
#endif

namespace mla::detail {

namespace {

#if MLA_WITH_CUDA
constexpr bool cuda_built = true;
#else
constexpr bool cuda_built = false;
#endif
#if MLA_WITH_HIP
constexpr bool hip_built = true;
#else
constexpr bool hip_built = false;
#endif

}  // namespace

bool vendor_queue_built(DeviceBackend backend) {
  return (backend == DeviceBackend::cuda && cuda_built) || (backend == DeviceBackend::hip && hip_built);
}

std::shared_ptr<QueueImpl> make_vendor_queue(DeviceBackend backend, int device_index) {
#if MLA_WITH_CUDA
  if (backend == DeviceBackend::cuda) return make_cuda_queue(device_index);
#endif
#if MLA_WITH_HIP
  if (backend == DeviceBackend::hip) return make_hip_queue(device_index);
#endif
  (void)device_index;
  raise(ErrorCategory::not_supported, "this build of mlaprefill has no " + std::string(device_backend_name(backend)) +
                                          " queue (use the " + std::string(device_backend_name(backend)) + " preset)");
}

std::shared_ptr<QueueImpl> borrow_vendor_queue(DeviceBackend backend, int device_index, void* stream) {
#if MLA_WITH_CUDA
  if (backend == DeviceBackend::cuda) return borrow_cuda_queue(device_index, stream);
#endif
#if MLA_WITH_HIP
  if (backend == DeviceBackend::hip) return borrow_hip_queue(device_index, stream);
#endif
  (void)device_index;
  (void)stream;
  raise(ErrorCategory::not_supported, "this build of mlaprefill has no " + std::string(device_backend_name(backend)) +
                                          " queue to borrow a stream with (use the " +
                                          std::string(device_backend_name(backend)) + " preset)");
}

std::optional<DeviceBackend> default_vendor_queue() {
#if MLA_WITH_CUDA
  if (!detect_devices().empty()) return DeviceBackend::cuda;
#elif MLA_WITH_HIP
  if (!detect_devices().empty()) return DeviceBackend::hip;
#endif
  return std::nullopt;
}

}  // namespace mla::detail
