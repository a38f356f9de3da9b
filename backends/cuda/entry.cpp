// The CUDA_FLASH entry of the library's backend table, compiled in every
// build: a build without CUDA still lists the backend and says why it is
// unavailable; a CUDA build also says whether its code objects fit the device.
#include <memory>
#include <string>

#include "arch_coverage.hpp"
#include "builtin_entries.hpp"
#include "capability.hpp"
#include "cuda_hip/flash_dims.hpp"
#include "kernel_choice.hpp"
#include "mla/error.hpp"

#if defined(MLA_WITH_CUDA)
#include "cuda_flash_backend.hpp"
#endif

namespace mla::detail {

BackendEntry cuda_flash_backend_entry() {
  BackendDescription description;
  description.name = "CUDA_FLASH";
  description.dtypes.assign(std::begin(gpu::flash_e4m3_dtypes), std::end(gpu::flash_e4m3_dtypes));
  description.dtype_refusal = [](DType dtype, const DeviceCapability& device) {
    return dtype == DType::float8_e4m3 ? cuda_flash::e4m3_device_gap(device) : std::string();
  };
  description.dims.assign(std::begin(gpu::flash_dims), std::end(gpu::flash_dims));
  description.supports_capability = cuda_flash::supports_device;
  description.fp8_output = true;
  description.queue_kinds = {cuda_flash::queue_kind};
  description.kernel_refusal = [](const SelectorConfig& request, const DeviceCapability& device) {
    std::string refusal = cuda_flash::choose_kernel({request.dtype, request.dims, &device}).refusal;
#if defined(MLA_WITH_CUDA)
    if (refusal.empty() && request.dtype == DType::float8_e4m3) {
      refusal = cuda_flash::e4m3_code_gap(MLA_CUDA_ARCHITECTURES, device);
    }
#endif
    return refusal;
  };
#if defined(MLA_WITH_CUDA)
  description.availability = [] { return Availability{}; };
  description.device_availability = [](const DeviceCapability& capability) {
    if (cuda_flash::architectures_cover(MLA_CUDA_ARCHITECTURES, capability)) return Availability{};
    return Availability{false, cuda_flash::architectures_gap(MLA_CUDA_ARCHITECTURES, capability)};
  };
  BackendFactory factory = [](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return cuda_flash::make_cuda_flash_backend(params);
  };
#else
  description.availability = [] { return Availability{false, "built without CUDA"}; };
  BackendFactory factory = [](const BackendParams&) -> std::unique_ptr<PrefillBackend> {
    raise(ErrorCategory::not_supported, "CUDA_FLASH: built without CUDA (configure with the cuda preset)");
  };
#endif
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::detail
