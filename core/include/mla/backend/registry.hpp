// Backend registries: enum member -> factory, with overrides and a CUSTOM slot
// (vLLM's MLAPrefillBackendEnum / AttentionBackendEnum and their register
// functions). One generic type serves both enums. The library's own backends
// come from an explicit table, never from static self-registration. Every
// operation is safe to call from several threads at once.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mla/backend.hpp"

namespace mla {

// The members (mla/backend/members.def: REFERENCE, KOKKOS, CUDA_FLASH,
// HIP_FLASH, HOPPER_FLASH), then CUSTOM, the slot only registration fills.
#define MLA_BACKEND_MEMBER(member, entry) member,
enum class MlaPrefillBackendKind {
#include "mla/backend/members.def"
  CUSTOM
};
// General multi-head attention (dqk == dv) served by the same kernels.
enum class AttentionBackendKind {
#include "mla/backend/members.def"
  CUSTOM
};
#undef MLA_BACKEND_MEMBER

// How a registration treats a member that already has an override.
enum class RegisterMode {
  add,      // fail with Error(plugin) if the member is already overridden / registered
  replace,  // replace whatever override is there
};

template <class Kind>
class BackendRegistry {
 public:
  // `label` is "MLA prefill backend" or "attention backend"; `register_call`
  // names the function a user calls to fill CUSTOM, for the error message.
  using DefaultTable = std::function<std::optional<BackendEntry>(Kind)>;
  BackendRegistry(std::string label, std::string register_call, DefaultTable defaults);
  ~BackendRegistry();
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  // The override if there is one, else the default entry. CUSTOM without a
  // registration raises Error(not_found) telling how to register it.
  BackendEntry resolve(Kind kind) const;
  void register_backend(Kind kind, BackendEntry entry, RegisterMode mode = RegisterMode::replace);
  bool is_overridden(Kind kind) const;
  void clear_override(Kind kind);
  void clear_all_overrides();

  // Member of a name ("REFERENCE"); unknown names raise Error(not_found):
  // "Unknown MLA prefill backend: 'X'. Valid options are: REFERENCE, KOKKOS, ..."
  Kind parse(std::string_view name) const;
  static std::string_view name(Kind kind);
  static std::vector<Kind> members();
  const std::string& label() const;

 private:
  struct State;
  State* state_;
};

extern template class BackendRegistry<MlaPrefillBackendKind>;
extern template class BackendRegistry<AttentionBackendKind>;

using MlaPrefillRegistry = BackendRegistry<MlaPrefillBackendKind>;
using AttentionRegistry = BackendRegistry<AttentionBackendKind>;

// The process-wide registries.
MlaPrefillRegistry& mla_prefill_registry();
AttentionRegistry& attention_registry();

// vLLM's register_backend(...) for MLA prefill: binds `entry` to `kind`
// (CUSTOM or an override of a member).
void register_mla_prefill_backend(MlaPrefillBackendKind kind, BackendEntry entry,
                                  RegisterMode mode = RegisterMode::replace);
void register_attention_backend(AttentionBackendKind kind, BackendEntry entry,
                                RegisterMode mode = RegisterMode::replace);

// The library's own entry for a member (the explicit table); nullopt for CUSTOM.
// Defined by the backends layer (backends/builtin_backends.cpp), which alone
// knows the backends this build carries.
std::optional<BackendEntry> builtin_mla_prefill_entry(MlaPrefillBackendKind kind);
std::optional<BackendEntry> builtin_attention_entry(AttentionBackendKind kind);

// Named factories that YAML overrides may refer to ("KOKKOS: REFERENCE" binds
// member KOKKOS to the factory named REFERENCE). Built-in backend names are
// always present; plugins add their own names.
void register_named_factory(const std::string& name, BackendEntry entry, RegisterMode mode = RegisterMode::add);
std::optional<BackendEntry> find_named_factory(const std::string& name);
std::vector<std::string> named_factory_names();
void remove_named_factory(const std::string& name);

}  // namespace mla
