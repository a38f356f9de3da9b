// Chooses the prefill backend, mirroring vLLM's get_mla_prefill_backend
// (docs/contract.md §10): unknown capability -> configured default; explicit choice
// validated with no silent fallback; auto -> first valid backend of the
// platform's priority list; none valid -> error with every reason. Choices are
// cached per (vendor, capability, dtype, dims, explicit choice).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mla/backend.hpp"
#include "mla/backend/registry.hpp"
#include "mla/config.hpp"

namespace mla {

// What the selector found out about one backend.
struct CandidateReport {
  std::string name;
  Availability availability;
  std::vector<std::string> reasons;  // validate(); empty means valid
  int priority = -1;                 // position in the platform's list, -1 if absent
};

struct Selection {
  MlaPrefillBackendKind kind = MlaPrefillBackendKind::REFERENCE;
  std::string name;
  BackendEntry entry;
  std::string why;  // "explicit choice from MLA_PREFILL_BACKEND", "first valid in the priority list for nvidia 8.0+"...
  DeviceCapability platform;
  std::vector<CandidateReport> walk;  // the candidates considered, in order
  // What select() was asked for: the dtype and dims the backend was
  // validated for (or, on a platform of unknown capability, taken without
  // validation). create() builds only a backend of these.
  SelectorConfig request;
};

// Applies the process-wide parts of `config`, in this order: its log_level
// when set (set_log_level), then its plugins (load_plugin(); files already
// loaded are skipped), then its overrides, each bound in the process registry
// to its named factory in replace mode (plugins first, since they may add the
// factories that overrides name). A plugin that fails to load raises
// Error(plugin) and leaves the registries unchanged; an override naming no
// registered factory raises Error(config) listing the known ones and binds
// none of the overrides (the plugins stay loaded).
//
// This changes process state, unlike everything else here: the command and
// API users call it once, before constructing Selectors from the same Config.
// Calling it again is harmless: loaded plugins are skipped and overrides are
// bound again (a registry change, so Selectors' caches start afresh).
void configure(const Config& config);

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

// A queue the selected backend runs on (make_queue on its description): the
// host queue for REFERENCE and KOKKOS even on a GPU machine, a CUDA queue on
// device `device_index` for CUDA_FLASH, and so on. When the queue cannot be
// created and the platform was only simulated (MLA_PLATFORM), the error says so.
Queue make_queue(const Selection& selection, int device_index = 0);

class Selector {
 public:
  // Keeps `config` and an empty cache. Constructing a Selector changes nothing
  // outside it: call configure(config) first to apply the config's log level,
  // plugins and overrides.
  explicit Selector(Config config);

  // `platform` is the device to select for (current_platform() for this
  // process's); `explicit_backend`, when given, is an API call's choice and
  // beats the config. The answer depends only on the arguments, the config and
  // the process registry.
  Selection select(const SelectorConfig& request, const DeviceCapability& platform,
                   const std::optional<std::string>& explicit_backend = std::nullopt);

  // Every member (CUSTOM only when registered) with its availability and reasons.
  std::vector<CandidateReport> report(const SelectorConfig& request, const DeviceCapability& platform) const;

  // Builds the selected backend. Raises Error(invalid_argument) naming both
  // values when `params` ask for another dtype or dims than the selection was
  // made for (select again for those), or when the selection holds no factory.
  std::unique_ptr<PrefillBackend> create(const Selection& selection, const BackendParams& params) const;

  void clear_cache();
  const Config& config() const { return config_; }

 private:
  Config config_;
  struct Cache;
  std::shared_ptr<Cache> cache_;
};

// A backend ready to run and the queue it runs on.
struct ChosenBackend {
  Selection selection;  // which backend and why (Selection::why)
  std::unique_ptr<PrefillBackend> backend;
  Queue queue;  // make_queue(selection): host for KOKKOS, a GPU for CUDA_FLASH...
};

// Selects for params' dtype and dims on `platform`, builds the backend with
// `params` and makes the selection's queue: the three calls a program makes
// in turn. mla::choose_backend(params) (mla/platform.hpp) is the same on
// this process's platform with the configuration as it comes.
ChosenBackend choose_backend(Selector& selector, const BackendParams& params, const DeviceCapability& platform);

}  // namespace mla
