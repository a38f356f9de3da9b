#include "hip_flash_backend.hpp"

#include "mla/error.hpp"

namespace mla::hip {

std::unique_ptr<PrefillBackend> make_hip_flash_backend(const BackendParams&) {
  raise(ErrorCategory::not_supported, "HIP_FLASH: the MFMA kernels are not part of this build yet");
}

}  // namespace mla::hip
