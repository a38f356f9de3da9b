// The explicit table of the library's own backends (mla/backend_members.def).
// Static self-registration would be dropped by the linker from a static libmla
// when nothing references the backend's object file; a switch over the
// members cannot be.
#include "builtin_entries.hpp"
#include "mla/backend/registry.hpp"

namespace mla {
namespace {

// Both enums have the same members.
template <class Kind>
std::optional<BackendEntry> builtin_entry(Kind kind) {
  switch (kind) {
#define MLA_BACKEND_MEMBER(member, entry) \
  case Kind::member:                      \
    return detail::entry();
#include "mla/backend/members.def"
#undef MLA_BACKEND_MEMBER
    case Kind::CUSTOM:
      return std::nullopt;  // filled only by registration
  }
  return std::nullopt;
}

}  // namespace

std::optional<BackendEntry> builtin_mla_prefill_entry(MlaPrefillBackendKind kind) { return builtin_entry(kind); }

// General attention runs the same kernels; its entries differ only in asking
// validate() for qk_head_dim == v_head_dim.
std::optional<BackendEntry> builtin_attention_entry(AttentionBackendKind kind) {
  std::optional<BackendEntry> entry = builtin_entry(kind);
  if (entry) entry->description.requires_equal_qk_v = true;
  return entry;
}

}  // namespace mla
