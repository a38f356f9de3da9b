// Internal: one backend a plugin described through the C ABI, and the
// registry entry that wraps it. The loader builds specs while a plugin
// registers; the adapter (plugin_backend.cpp) turns PrefillBackend calls into
// calls of the plugin's C operations.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mla/backend.hpp"
#include "mla/plugin/abi.h"

namespace mla::detail {

struct PluginBackendSpec {
  std::string plugin_path;  // for messages
  std::string name;
  std::vector<DType> dtypes;
  std::vector<MlaDims> dims;  // empty: any
  bool fp8_output = false;
  void* user_data = nullptr;
  int (*supports_capability)(void*, std::int32_t, std::int32_t, std::int32_t) = nullptr;
  int (*availability)(void*, char*, std::size_t) = nullptr;
  mla_plugin_backend_ops ops{};
};

// Copies and checks a plugin's description; raises Error(plugin) saying what
// is wrong with it (no name, unknown dtype, a required operation missing...).
// `what` names the registration in messages, e.g. "register_backend(CUSTOM)".
PluginBackendSpec make_plugin_spec(const mla_plugin_backend* backend, const std::string& plugin_path,
                                   const std::string& what);

// The registry entry of a spec: its description answers through the
// plugin's callbacks and its factory builds the adapter.
BackendEntry make_plugin_entry(std::shared_ptr<const PluginBackendSpec> spec);

}  // namespace mla::detail
