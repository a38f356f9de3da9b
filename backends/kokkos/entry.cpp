// The KOKKOS entry of the library's backend table, compiled in every build:
// fp32/fp16/bf16, any dims, any device capability (it runs on the host).
// Without Kokkos it still links and reports why it is unavailable.
#include <memory>

#include "builtin_entries.hpp"
#include "mla/error.hpp"

#ifdef MLA_WITH_KOKKOS
#include "kokkos_backend.hpp"
#endif

namespace mla::detail {

BackendEntry kokkos_backend_entry() {
  BackendDescription description;
  description.name = "KOKKOS";
  description.dtypes = {DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3};
  description.fp8_output = true;
  description.queue_kinds = {DeviceBackend::host};
  description.availability = [] {
#ifdef MLA_WITH_KOKKOS
    return Availability{};
#else
    return Availability{false, "built without Kokkos"};
#endif
  };
  BackendFactory factory = [](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
#ifdef MLA_WITH_KOKKOS
    return std::make_unique<kokkos::KokkosBackend>(params);
#else
    (void)params;
    raise(ErrorCategory::not_supported, "KOKKOS backend is not available: built without Kokkos");
#endif
  };
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::detail
