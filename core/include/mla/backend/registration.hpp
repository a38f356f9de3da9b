// For backend authors: in-process registration of a backend compiled into the
// application, with make_backend_entry() and register_mla_prefill_backend(),
// the BackendRegistration object, or the MLA_REGISTER_PREFILL_BACKEND macro
// (vLLM's register_backend call and decorator). The other door, plugins, is
// the C ABI of mla/plugin/abi.h, loaded with load_plugin() (mla/selector.hpp).
// The library's own backends stay in the explicit table of
// builtin_mla_prefill_entry(); self-registration is for applications, whose
// objects the linker keeps.
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "mla/backend.hpp"
#include "mla/backend/registry.hpp"

namespace mla {

namespace detail {

// The factory of make_backend_entry / BackendRegistration: a named type, so a
// registration can later recognise its own entry in the registry.
template <class Backend>
struct BackendFactoryOf {
  std::shared_ptr<const int> token;  // identity of one registration
  std::unique_ptr<PrefillBackend> operator()(const BackendParams& params) const {
    return std::make_unique<Backend>(params);
  }
};

inline MlaPrefillRegistry& registry_of(MlaPrefillBackendKind) { return mla_prefill_registry(); }
inline AttentionRegistry& registry_of(AttentionBackendKind) { return attention_registry(); }

}  // namespace detail

// A registry entry whose factory builds `Backend` from BackendParams:
//   mla::register_mla_prefill_backend(mla::MlaPrefillBackendKind::CUSTOM,
//                                     mla::make_backend_entry<MyBackend>(description));
template <class Backend>
BackendEntry make_backend_entry(BackendDescription description) {
  static_assert(std::is_base_of_v<PrefillBackend, Backend>, "Backend must derive from mla::PrefillBackend");
  static_assert(std::is_constructible_v<Backend, const BackendParams&>,
                "Backend must be constructible from const mla::BackendParams&");
  return {std::move(description), detail::BackendFactoryOf<Backend>{std::make_shared<const int>(0)}};
}

// Registers `Backend` for `kind` for as long as the object lives:
//   static mla::BackendRegistration<MyBackend> registration{mla::MlaPrefillBackendKind::CUSTOM, description};
// The destructor puts back what the member held before (another override, or
// nothing), unless something else has been registered there since; scopes
// nest. The checks and the registry writes are separate registry calls, so
// registrations of the same member racing from other threads may interleave.
// The default mode replaces, like register_mla_prefill_backend: an exception
// thrown while static objects are built would end the program.
template <class Backend, class Kind = MlaPrefillBackendKind>
class BackendRegistration {
 public:
  BackendRegistration(Kind kind, BackendDescription description, RegisterMode mode = RegisterMode::replace)
      : kind_(kind) {
    auto& registry = detail::registry_of(kind_);
    BackendEntry entry = make_backend_entry<Backend>(std::move(description));
    token_ = entry.factory.template target<detail::BackendFactoryOf<Backend>>()->token;
    if (registry.is_overridden(kind_)) previous_ = registry.resolve(kind_);
    registry.register_backend(kind_, std::move(entry), mode);
  }
  ~BackendRegistration() {
    auto& registry = detail::registry_of(kind_);
    try {
      if (!registry.is_overridden(kind_)) return;
      const BackendEntry current = registry.resolve(kind_);
      const auto* factory = current.factory.template target<detail::BackendFactoryOf<Backend>>();
      if (factory == nullptr || factory->token != token_) return;  // replaced since: not ours to undo
      if (previous_) {
        registry.register_backend(kind_, *previous_, RegisterMode::replace);
      } else {
        registry.clear_override(kind_);
      }
    } catch (...) {
      // A destructor must not throw; a registry that cannot answer has nothing of ours to undo.
    }
  }
  BackendRegistration(const BackendRegistration&) = delete;
  BackendRegistration& operator=(const BackendRegistration&) = delete;

  Kind kind() const { return kind_; }

 private:
  Kind kind_;
  std::shared_ptr<const int> token_;
  std::optional<BackendEntry> previous_;
};

}  // namespace mla

#define MLA_DETAIL_CONCAT_INNER(a, b) a##b
#define MLA_DETAIL_CONCAT(a, b) MLA_DETAIL_CONCAT_INNER(a, b)

// Registers Backend for MLA prefill member `member` (CUSTOM, or a member it
// overrides) when the program starts, vLLM's @register_backend decorator.
// Use at namespace scope in application code, not in a static library (the
// linker drops objects nothing references):
//   MLA_REGISTER_PREFILL_BACKEND(CUSTOM, MyBackend, my_description());
#define MLA_REGISTER_PREFILL_BACKEND(member, Backend, ...)                                             \
  static const ::mla::BackendRegistration<Backend> MLA_DETAIL_CONCAT(mla_registration_, __COUNTER__) { \
    ::mla::MlaPrefillBackendKind::member, __VA_ARGS__                                                  \
  }
