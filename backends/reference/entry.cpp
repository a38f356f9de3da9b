// The REFERENCE entry of the library's backend table: every dtype, any dims,
// any device (it runs on the host), always available.
#include <memory>

#include "builtin_entries.hpp"
#include "reference_backend.hpp"

namespace mla::detail {

BackendEntry reference_backend_entry() {
  BackendDescription description;
  description.name = "REFERENCE";
  description.dtypes = {DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3};
  description.fp8_output = true;
  description.queue_kinds = {DeviceBackend::host};
  BackendFactory factory = [](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return std::make_unique<reference::ReferenceBackend>(params);
  };
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::detail
