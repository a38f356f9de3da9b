// The emulated HIP_FLASH entry points of a build without a clang 15 or newer
// (hip_emulated.cmake): the kernel source needs clang's ext_vector_type and
// _Float16, so nothing was compiled and every launch is refused.
#include <string>

#include "mla/error.hpp"
#include "simt/hip_flash_emulated.hpp"

namespace mla::simt {

bool hip_flash_emulated_built() { return false; }

void launch_hip_flash_emulated(const gpu::FlashParams&, DType dtype, int head_dim_qk, int head_dim_v, AmdTarget) {
  raise(ErrorCategory::not_supported,
        "emulated HIP_FLASH (" + std::string(dtype_name(dtype)) + ", " + std::to_string(head_dim_qk) + "/" +
            std::to_string(head_dim_v) +
            ") was not built: it needs clang++ 15 or newer, and CMake found none (MLA_SIMT_CLANGXX)");
}

void project_latents_hip_emulated(const TensorView&, const TensorView&, const TensorView&, const TensorView&,
                                  AmdTarget) {
  raise(ErrorCategory::not_supported,
        "emulated HIP_FLASH's MFMA projection was not built: it needs clang++ 15 or newer, and CMake found none "
        "(MLA_SIMT_CLANGXX)");
}

}  // namespace mla::simt
