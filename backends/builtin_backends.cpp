// The explicit table of the library's own backends. Static self-registration
// would be dropped by the linker from a static libmla when nothing references
// the backend's object file; a switch over the members cannot be.
#include "builtin_entries.hpp"
#include "mla/registry.hpp"

namespace mla {

std::optional<BackendEntry> builtin_mla_prefill_entry(MlaPrefillBackendKind kind) {
  switch (kind) {
    case MlaPrefillBackendKind::REFERENCE:
      return detail::reference_backend_entry();
    case MlaPrefillBackendKind::KOKKOS:
      return detail::kokkos_backend_entry();
    case MlaPrefillBackendKind::CUDA_FLASH:
      return detail::cuda_flash_backend_entry();
    case MlaPrefillBackendKind::HIP_FLASH:
      return detail::hip_flash_backend_entry();
    case MlaPrefillBackendKind::CUSTOM:
      return std::nullopt;  // filled only by registration
  }
  return std::nullopt;
}

// General attention runs the same kernels; its entries differ only in asking
// validate() for qk_head_dim == v_head_dim.
std::optional<BackendEntry> builtin_attention_entry(AttentionBackendKind kind) {
  std::optional<BackendEntry> entry;
  switch (kind) {
    case AttentionBackendKind::REFERENCE:
      entry = detail::reference_backend_entry();
      break;
    case AttentionBackendKind::KOKKOS:
      entry = detail::kokkos_backend_entry();
      break;
    case AttentionBackendKind::CUDA_FLASH:
      entry = detail::cuda_flash_backend_entry();
      break;
    case AttentionBackendKind::HIP_FLASH:
      entry = detail::hip_flash_backend_entry();
      break;
    case AttentionBackendKind::CUSTOM:
      break;
  }
  if (entry) entry->description.requires_equal_qk_v = true;
  return entry;
}

}  // namespace mla
