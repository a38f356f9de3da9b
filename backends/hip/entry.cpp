// The HIP_FLASH entry of the library's backend table. Compiled in every build:
// without HIP it only says why it is unavailable. Device support is gated
// twice, as ggml does it: the kernels are compiled per gfx target (device
// macros in mfma.hpp), and here a host predicate knows which targets were
// compiled in (MLA_HIP_COMPILED_ARCHS, from CMake), so a device without a code
// object is refused with a reason instead of failing at its first launch.
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "builtin_entries.hpp"
#include "cuda_hip/flash_dims.hpp"
#include "hip/capability.hpp"
#include "hip/kernel_choice.hpp"
#include "mla/error.hpp"

#if MLA_WITH_HIP
#include "hip_flash_backend.hpp"
#endif

namespace mla::detail {
namespace {

#if MLA_WITH_HIP
Availability device_code_for(const DeviceCapability& capability) {
  const std::string gap = hip_flash::code_object_gap(
      capability.arch, {MLA_HIP_COMPILED_ARCHS, MLA_HIP_INSPECTED_ARCHS, MLA_HIP_CANDIDATE_ARCHS, MLA_HIP_DROPPED_ARCHS,
                        MLA_HIP_DROPPED_REASON});
  if (gap.empty()) return {};
  return {false, gap};
}
#endif

}  // namespace

BackendEntry hip_flash_backend_entry() {
  BackendDescription description;
  description.name = "HIP_FLASH";
  description.dtypes.assign(std::begin(gpu::flash_e4m3_dtypes), std::end(gpu::flash_e4m3_dtypes));
  description.dtype_refusal = [](DType dtype, const DeviceCapability& device) {
    return dtype == DType::float8_e4m3 ? hip_flash::e4m3_device_gap(device) : std::string();
  };
  description.dims.assign(std::begin(gpu::flash_dims), std::end(gpu::flash_dims));
  description.supports_capability = hip_flash::supports_device;
  description.fp8_output = true;
  description.queue_kinds = {hip_flash::queue_kind};
  description.kernel_refusal = [](const SelectorConfig& request, const DeviceCapability& device) {
    return hip_flash::choose_kernel({request.dtype, request.dims, &device}).refusal;
  };
#if MLA_WITH_HIP
  description.availability = [] { return Availability{}; };
  description.device_availability = device_code_for;
  BackendFactory factory = [](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return hip_flash::make_hip_flash_backend(params);
  };
#else
  description.availability = [] { return Availability{false, "built without HIP"}; };
  BackendFactory factory = [](const BackendParams&) -> std::unique_ptr<PrefillBackend> {
    raise(ErrorCategory::not_supported,
          "HIP_FLASH is not available: this build of mlaprefill was configured without HIP (use the hip preset)");
  };
#endif
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::detail
