// Loading plugins: dlopen, the ABI handshake, staged registration and an
// all-or-nothing commit. A plugin's registrations are collected while its
// mla_plugin_register runs and reach the registries only after every one of
// them was accepted and none collides with what is already registered, so a
// failed load leaves the process as it found it.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include "mla/backend/registration.hpp"
#include "mla/backend/registry.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/plugin/abi.h"
#include "mla/selector.hpp"
#include "plugin/plugin_backend.hpp"

namespace mla {
namespace {

namespace fs = std::filesystem;

// One registration a plugin asked for, not yet applied.
struct Staged {
  bool member = true;  // registry member, else named factory
  std::string name;    // "CUSTOM" or the factory name
  MlaPrefillBackendKind kind = MlaPrefillBackendKind::CUSTOM;
  RegisterMode mode = RegisterMode::add;
  BackendEntry entry;

  std::string describe() const { return member ? "MLA prefill backend " + name : "the factory named '" + name + "'"; }
};

// What the host callbacks see through mla_plugin_host::context.
struct Staging {
  std::string path;
  std::vector<Staged> registrations;
  std::optional<std::string> error;  // the first refusal; the load fails with it
};

struct LoadedPlugin {
  std::string path;
  std::vector<Staged> registrations;  // kept to say who owns a member in messages
};

// Handles of loaded plugins are never closed: entries, backends and cached
// selections hold pointers into them for the life of the process.
struct PluginTable {
  std::mutex mutex;  // serialises loads
  std::vector<LoadedPlugin> loaded;
};

PluginTable& plugin_table() {
  static PluginTable table;
  return table;
}

[[noreturn]] void load_error(const std::string& path, const std::string& problem) {
  raise(ErrorCategory::plugin, "Cannot load plugin '" + path + "': " + problem);
}

RegisterMode register_mode(std::int32_t mode) {
  if (mode == MLA_PLUGIN_REGISTER_ADD) return RegisterMode::add;
  if (mode == MLA_PLUGIN_REGISTER_REPLACE) return RegisterMode::replace;
  raise(ErrorCategory::plugin,
        "mode " + std::to_string(mode) + " is neither MLA_PLUGIN_REGISTER_ADD (0) nor MLA_PLUGIN_REGISTER_REPLACE (1)");
}

// Adds `staged` unless the plugin already staged the same target; a second
// registration of one target in the same plugin needs replace mode as well.
void stage(Staging& staging, Staged staged) {
  auto same = std::find_if(staging.registrations.begin(), staging.registrations.end(), [&](const Staged& other) {
    return other.member == staged.member && other.name == staged.name;
  });
  if (same == staging.registrations.end()) {
    staging.registrations.push_back(std::move(staged));
  } else if (staged.mode == RegisterMode::replace) {
    *same = std::move(staged);
  } else {
    raise(ErrorCategory::plugin, "it registers " + staged.describe() + " twice without MLA_PLUGIN_REGISTER_REPLACE");
  }
}

// The host callbacks. They are called from C and must not let an exception
// escape; a refusal is recorded and reported by the loader, whatever the
// plugin does with the status afterwards.
int stage_callback(void* context, const char* name, const mla_plugin_backend* backend, std::int32_t mode,
                   bool member) noexcept {
  auto* staging = static_cast<Staging*>(context);
  const char* call = member ? "register_backend" : "register_named_factory";
  try {
    if (name == nullptr || *name == '\0') {
      raise(ErrorCategory::plugin,
            std::string(call) + " was called without a " + (member ? "member" : "factory") + " name");
    }
    const std::string what = std::string(call) + "(" + name + ")";
    Staged staged;
    staged.member = member;
    staged.name = name;
    try {
      staged.mode = register_mode(mode);
      if (member) {
        staged.kind = mla_prefill_registry().parse(name);
      } else {
        // register_named_factory would refuse these at commit; saying so now names the call.
        for (MlaPrefillBackendKind kind : MlaPrefillRegistry::members()) {
          if (kind != MlaPrefillBackendKind::CUSTOM && MlaPrefillRegistry::name(kind) == staged.name) {
            raise(ErrorCategory::plugin, "'" + staged.name + "' is a built-in backend and cannot be redefined");
          }
        }
      }
    } catch (const Error& error) {
      raise(ErrorCategory::plugin, what + ": " + error.what());
    }
    staged.entry = detail::make_plugin_entry(
        std::make_shared<const detail::PluginBackendSpec>(detail::make_plugin_spec(backend, staging->path, what)));
    stage(*staging, std::move(staged));
    return 0;
  } catch (const std::exception& error) {
    if (!staging->error) staging->error = error.what();
    return 1;
  }
}

int register_backend_callback(void* context, const char* member, const mla_plugin_backend* backend, std::int32_t mode) {
  return stage_callback(context, member, backend, mode, true);
}

int register_named_factory_callback(void* context, const char* factory_name, const mla_plugin_backend* backend,
                                    std::int32_t mode) {
  return stage_callback(context, factory_name, backend, mode, false);
}

std::string owner_of(const PluginTable& table, const Staged& staged) {
  for (const LoadedPlugin& plugin : table.loaded) {
    for (const Staged& other : plugin.registrations) {
      if (other.member == staged.member && other.name == staged.name) return " (by plugin '" + plugin.path + "')";
    }
  }
  return "";
}

bool is_taken(const Staged& staged) {
  return staged.member ? mla_prefill_registry().is_overridden(staged.kind)
                       : find_named_factory(staged.name).has_value();
}

// What a registration replaced, to put it back if a later one fails.
struct Undo {
  const Staged* staged;
  std::optional<BackendEntry> previous;
};

void apply(const Staged& staged) {
  if (staged.member) {
    mla_prefill_registry().register_backend(staged.kind, staged.entry, staged.mode);
  } else {
    register_named_factory(staged.name, staged.entry, staged.mode);
  }
}

void undo(const Undo& step) noexcept {
  try {
    const Staged& staged = *step.staged;
    if (staged.member) {
      if (step.previous)
        mla_prefill_registry().register_backend(staged.kind, *step.previous, RegisterMode::replace);
      else
        mla_prefill_registry().clear_override(staged.kind);
    } else {
      if (step.previous)
        register_named_factory(staged.name, *step.previous, RegisterMode::replace);
      else
        remove_named_factory(staged.name);
    }
  } catch (const std::exception& error) {
    log(LogLevel::error, std::string("Rolling back a failed plugin load: ") + error.what());
  }
}

// Applies every registration or none. The checks beforehand catch every
// collision with what was registered before the load; the undo list covers
// a registration that races with the commit from another thread.
void commit(const PluginTable& table, const Staging& staging) {
  for (const Staged& staged : staging.registrations) {
    if (staged.mode == RegisterMode::add && is_taken(staged)) {
      load_error(staging.path, "it registers " + staged.describe() + ", which is already registered" +
                                   owner_of(table, staged) +
                                   "; a plugin that means to replace it must register it with "
                                   "MLA_PLUGIN_REGISTER_REPLACE");
    }
  }
  std::vector<Undo> done;
  try {
    for (const Staged& staged : staging.registrations) {
      Undo step{&staged, std::nullopt};
      if (staged.member) {
        if (mla_prefill_registry().is_overridden(staged.kind))
          step.previous = mla_prefill_registry().resolve(staged.kind);
      } else {
        step.previous = find_named_factory(staged.name);
      }
      apply(staged);
      done.push_back(std::move(step));
    }
  } catch (const std::exception& error) {
    for (auto step = done.rbegin(); step != done.rend(); ++step) undo(*step);
    load_error(staging.path, error.what());
  }
}

// A dlopen handle that closes itself unless the load succeeds. The code is
// never unmapped (RTLD_NODELETE), even when the load fails: by then the
// plugin's constructors may have registered factories with libmla directly,
// or thrown exceptions whose type information lives in the plugin.
class Library {
 public:
  explicit Library(const std::string& path) : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) {
    if (handle_ == nullptr) {
      const char* reason = dlerror();
      load_error(path, std::string("not a loadable shared library: ") + (reason != nullptr ? reason : "unknown error"));
    }
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  void* symbol(const char* name) const {
    dlerror();
    return dlsym(handle_, name);
  }
  // Keeps the library loaded for the rest of the process.
  void keep() { handle_ = nullptr; }

 private:
  void* handle_;
};

template <class Function>
Function function_symbol(const Library& library, const std::string& path, const char* name) {
  void* address = library.symbol(name);
  if (address == nullptr) {
    load_error(path, std::string("it does not export ") + name +
                         " (is it an mlaprefill plugin? Define it with MLA_PLUGIN_EXPORT, see mla/plugin/abi.h)");
  }
  // POSIX guarantees that a dlsym address converts to a function pointer.
  Function function;
  static_assert(sizeof(function) == sizeof(address));
  std::memcpy(&function, &address, sizeof(function));
  return function;
}

const char* non_empty_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// Where this code was loaded from: libmla, or the executable when libmla is static.
fs::path library_location() {
  static const int anchor = 0;
  Dl_info info{};
  if (dladdr(&anchor, &info) != 0 && info.dli_fname != nullptr && *info.dli_fname != '\0') {
    std::error_code ec;
    const fs::path path = fs::weakly_canonical(info.dli_fname, ec);
    if (!ec) return path;
  }
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec);
}

}  // namespace

std::string plugin_dir() {
  if (const char* dir = non_empty_env("MLA_PLUGIN_DIR")) return dir;
  return (library_location().parent_path() / "mla" / "plugins").string();
}

std::string expand_plugin_path(const std::string& path) {
  static const std::string variable = "${MLA_PLUGIN_DIR}";
  std::string expanded = path;
  if (path.rfind(variable, 0) == 0) expanded = plugin_dir() + path.substr(variable.size());
  if (expanded.find("${") != std::string::npos) {
    raise(ErrorCategory::plugin,
          "Cannot load plugin '" + path + "': only a leading ${MLA_PLUGIN_DIR} is expanded in plugin paths");
  }
  return expanded;
}

void load_plugin(const std::string& requested) {
  const std::string expanded = expand_plugin_path(requested);
  if (expanded.empty()) raise(ErrorCategory::plugin, "Cannot load plugin '': the path is empty");
  std::error_code ec;
  if (!fs::exists(expanded, ec)) {
    load_error(expanded,
               "no such file" + (expanded == requested ? std::string() : " (expanded from '" + requested + "')"));
  }
  if (!fs::is_regular_file(expanded, ec)) load_error(expanded, "not a regular file");
  const std::string path = fs::canonical(expanded, ec).string();
  if (ec) load_error(expanded, ec.message());

  PluginTable& table = plugin_table();
  // A plugin whose constructors or registration load a plugin (or configure)
  // would lock the table's mutex a second time on this thread.
  static thread_local bool loading = false;
  if (loading) load_error(path, "a plugin loaded a plugin while being loaded itself; list both in the configuration");
  std::lock_guard lock(table.mutex);
  loading = true;
  struct Reset {
    ~Reset() { loading = false; }
  } reset;
  const auto same_path = [&](const LoadedPlugin& plugin) { return plugin.path == path; };
  if (std::any_of(table.loaded.begin(), table.loaded.end(), same_path)) {
    log(LogLevel::debug, "Plugin '" + path + "' is already loaded.");
    return;
  }

  Library library(path);
  const auto version = function_symbol<mla_plugin_abi_version_fn>(library, path, MLA_PLUGIN_ABI_VERSION_SYMBOL);
  const auto register_plugin = function_symbol<mla_plugin_register_fn>(library, path, MLA_PLUGIN_REGISTER_SYMBOL);
  const std::uint32_t plugin_version = version();
  if (plugin_version != MLA_PLUGIN_ABI_VERSION) {
    load_error(path, "it was built for plugin ABI version " + std::to_string(plugin_version) +
                         ", but this library expects version " + std::to_string(MLA_PLUGIN_ABI_VERSION) +
                         "; rebuild it against this library's mla/plugin/abi.h");
  }

  Staging staging{path, {}, std::nullopt};
  const mla_plugin_host host{MLA_PLUGIN_ABI_VERSION, staging.path.c_str(), &staging, register_backend_callback,
                             register_named_factory_callback};
  std::array<char, 1024> message{};
  int status = 0;
  try {
    status = register_plugin(&host, message.data(), message.size());
  } catch (const std::exception& error) {  // a C++ plugin that let an exception out of the C ABI
    load_error(path, std::string(MLA_PLUGIN_REGISTER_SYMBOL) + " threw: " + error.what());
  } catch (...) {
    load_error(path, std::string(MLA_PLUGIN_REGISTER_SYMBOL) + " threw an exception that is not a std::exception");
  }
  message.back() = '\0';
  if (staging.error) load_error(path, *staging.error);
  if (status != 0) {
    load_error(path, std::string(MLA_PLUGIN_REGISTER_SYMBOL) +
                         " failed: " + (message[0] != '\0' ? message.data() : "(the plugin gave no message)"));
  }
  if (staging.registrations.empty()) load_error(path, "it registered no backend");

  commit(table, staging);
  library.keep();
  std::string what;
  for (const Staged& staged : staging.registrations) what += (what.empty() ? "" : ", ") + staged.describe();
  table.loaded.push_back({path, std::move(staging.registrations)});
  log(LogLevel::info, "Loaded plugin '" + path + "': " + what + ".");
}

std::vector<std::string> loaded_plugins() {
  PluginTable& table = plugin_table();
  std::lock_guard lock(table.mutex);
  std::vector<std::string> paths;
  for (const LoadedPlugin& plugin : table.loaded) paths.push_back(plugin.path);
  return paths;
}

}  // namespace mla
