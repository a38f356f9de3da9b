// The HOPPER_FLASH entry of the library's backend table, compiled in every
// build: a build without CUDA, or a CUDA build without the sm_90a kernels
// (MLA_WITH_HOPPER_FLASH off), still lists the backend and says why it is
// unavailable.
#include <memory>

#include "builtin_entries.hpp"
#include "cuda_hip/flash_dims.hpp"
#include "hopper_config.hpp"
#include "mla/error.hpp"

#if defined(MLA_WITH_HOPPER_FLASH)
#include "hopper_backend.hpp"
#endif

namespace mla::detail {

BackendEntry hopper_flash_backend_entry() {
  BackendDescription description;
  description.name = "HOPPER_FLASH";
  // float8_e4m3 too: every device it runs on (9.0) has wgmma on e4m3.
  description.dtypes.assign(std::begin(gpu::flash_e4m3_dtypes), std::end(gpu::flash_e4m3_dtypes));
  description.dims.assign(std::begin(gpu::flash_dims), std::end(gpu::flash_dims));
  description.supports_capability = hopper_flash::supports_device;
  description.fp8_output = true;
  description.queue_kinds = {hopper_flash::queue_kind};
  description.kernel_refusal = [](const SelectorConfig& request, const DeviceCapability& device) {
    return hopper_flash::choose_kernel({request.dtype, request.dims, &device}).refusal;
  };
#if defined(MLA_WITH_HOPPER_FLASH)
  // The kernels are compiled for sm_90a alone, and the capability rule admits
  // 9.0 alone: nothing is left for device_availability to refuse.
  description.availability = [] { return Availability{}; };
  BackendFactory factory = [](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return hopper_flash::make_hopper_flash_backend(params);
  };
#else
#if defined(MLA_WITH_CUDA)
  constexpr const char* missing = "built without sm_90a code (MLA_WITH_HOPPER_FLASH off)";
#else
  constexpr const char* missing = "built without CUDA";
#endif
  description.availability = [] { return Availability{false, missing}; };
  BackendFactory factory = [](const BackendParams&) -> std::unique_ptr<PrefillBackend> {
    raise(ErrorCategory::not_supported, std::string("HOPPER_FLASH: ") + missing);
  };
#endif
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::detail
