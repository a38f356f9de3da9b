// Third-party backends, through two doors:
//
// 1. Plugins: shared libraries written against the C ABI of mla/plugin_abi.h,
//    loaded with load_plugin(), from a configuration's `plugins:` list, or
//    from $MLA_PLUGINS. configure() loads a Config's plugins before it
//    applies its `overrides:` (see selector.hpp).
// 2. In-process registration for application code: make_backend_entry()
//    with register_mla_prefill_backend(), the BackendRegistration object, or
//    the MLA_REGISTER_PREFILL_BACKEND macro (vLLM's register_backend call and
//    decorator). The library's own backends stay in the explicit table of
//    builtin_mla_prefill_entry(); self-registration is for applications,
//    whose objects the linker keeps.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mla/backend.hpp"
#include "mla/registry.hpp"

namespace mla {

// Loads the plugin at `path` and commits its registrations, all or nothing.
//
// `path` is absolute, relative to the working directory, or starts with
// ${MLA_PLUGIN_DIR} (see plugin_dir()). Loading a file that is already
// loaded, under any spelling that resolves to the same file, does nothing:
// a plugin registers once per process, and clear_override() on its member
// does not make a later load_plugin() register it again.
//
// Every failure raises Error(plugin) naming the file: the file does not
// exist; it is not a loadable shared library (the dynamic loader's message);
// it lacks mla_plugin_abi_version or mla_plugin_register; its ABI version
// differs from MLA_PLUGIN_ABI_VERSION (both are named); mla_plugin_register
// failed or registered nothing; a registration is malformed (unknown member,
// empty name, bad dtype, missing operation); or a registration in add mode
// meets a member or factory name that is already registered (the plugin must
// ask for MLA_PLUGIN_REGISTER_REPLACE to override one). After a failure the
// registries are exactly as before and the file is unloaded again.
// Safe to call from several threads; loads are serialised.
void load_plugin(const std::string& path);

// Absolute paths of the plugins loaded so far, in load order.
std::vector<std::string> loaded_plugins();

// What ${MLA_PLUGIN_DIR} at the start of a plugin path stands for:
// $MLA_PLUGIN_DIR when set, else the directory "mla/plugins" next to the
// libmla shared library (<prefix>/lib/mla/plugins when installed; the build
// tree puts the project's plugins in the same place relative to libmla).
std::string plugin_dir();

// A plugin path with a leading ${MLA_PLUGIN_DIR} expanded; raises
// Error(plugin) for any other ${...} in it.
std::string expand_plugin_path(const std::string& path);

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
