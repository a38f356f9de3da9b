// Reads the neutral configuration tree into mla::Config and layers the
// sources: built-in defaults < YAML file < environment. Every mistake is an
// Error(config) that names file:line:column, so a user can go straight to it.
#include "mla/config.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/config_tree.hpp"
#include "mla/backend/registry.hpp"
#include "mla/error.hpp"

namespace mla::detail {
extern const char* const default_config_yaml;  // generated from configs/default.yaml
}  // namespace mla::detail

namespace mla {
namespace {

using detail::config_error;
using detail::ConfigMember;
using detail::ConfigNode;
using detail::expect_kind;
using detail::expect_scalar;

constexpr const char* builtin_defaults_name = "built-in defaults (configs/default.yaml)";

// A member name; "auto" too when `allow_auto`. Unknown names carry the
// registry's own message so YAML, environment and API read the same.
std::string backend_name(const std::string& text, const ConfigOrigin& where, std::string_view what, bool allow_auto) {
  if (allow_auto && text == "auto") return text;
  try {
    mla_prefill_registry().parse(text);
  } catch (const Error& error) {
    const std::string prefix = what.empty() ? "" : std::string(what) + ": ";
    config_error(where, prefix + error.what() + (allow_auto ? " (or auto)" : ""));
  }
  return text;
}

std::string backend_name(const ConfigNode& node, std::string_view what, bool allow_auto) {
  return backend_name(expect_scalar(node, what), node.origin, what, allow_auto);
}

// "8.0" -> 80 (vLLM's to_int()): a one- or two-digit major, a one-digit minor.
int parse_capability(const ConfigNode& node, std::string_view what) {
  const std::string& text = expect_scalar(node, what);
  const auto dot = text.find('.');
  // Every character but the first dot is a digit: "8.." would otherwise read
  // its second dot as the minor digit ('.' - '0' = -2, capability 0.8).
  bool shaped = dot != std::string::npos && dot >= 1 && dot <= 2 && text.size() == dot + 2;
  for (std::size_t i = 0; shaped && i < text.size(); ++i) shaped = i == dot || (text[i] >= '0' && text[i] <= '9');
  if (!shaped) {
    config_error(node.origin, std::string(what) + " must be a capability like \"8.0\" or \"10.0\", got '" + text + "'");
  }
  return std::stoi(text.substr(0, dot)) * 10 + (text[dot + 1] - '0');
}

Vendor parse_vendor(const ConfigNode& node) {
  const std::string& text = expect_scalar(node, "'vendor'");
  if (text == "nvidia") return Vendor::nvidia;
  if (text == "amd") return Vendor::amd;
  if (text == "host") return Vendor::host;
  config_error(node.origin, "unknown vendor '" + text + "'. Valid vendors: nvidia, amd, host");
}

std::string capability_text(int value) { return std::to_string(value / 10) + "." + std::to_string(value % 10); }

PriorityRule parse_rule(const ConfigNode& node) {
  expect_kind(node, ConfigNode::Kind::map, "each entry of 'priorities'");
  detail::check_keys(node, {"vendor", "min_capability", "max_capability", "backends"}, "a priority rule");
  PriorityRule rule;
  rule.origin = node.origin;

  const ConfigNode* vendor = node.find("vendor");
  if (vendor == nullptr) config_error(node.origin, "a priority rule needs 'vendor' (nvidia, amd or host)");
  rule.vendor = parse_vendor(*vendor);

  for (const char* key : {"min_capability", "max_capability"}) {
    const ConfigNode* bound = node.find(key);
    if (bound == nullptr) continue;
    if (rule.vendor == Vendor::host) {
      config_error(bound->origin, std::string("'") + key + "' does not apply to vendor host, which has no capability");
    }
    (std::string_view(key) == "min_capability" ? rule.min_capability : rule.max_capability) =
        parse_capability(*bound, std::string("'") + key + "'");
  }
  if (rule.min_capability && rule.max_capability && *rule.min_capability > *rule.max_capability) {
    config_error(node.origin, "min_capability " + capability_text(*rule.min_capability) + " is above max_capability " +
                                  capability_text(*rule.max_capability));
  }

  const ConfigNode* backends = node.find("backends");
  if (backends == nullptr) config_error(node.origin, "a priority rule needs 'backends', a list of backend names");
  expect_kind(*backends, ConfigNode::Kind::sequence, "'backends'");
  if (backends->items.empty()) config_error(backends->origin, "'backends' must name at least one backend");
  for (const ConfigNode& item : backends->items) {
    std::string name = backend_name(item, "'backends'", false);
    if (std::find(rule.backends.begin(), rule.backends.end(), name) != rule.backends.end()) {
      config_error(item.origin, "backend " + name + " is listed twice in the same priority rule");
    }
    rule.backends.push_back(std::move(name));
  }
  return rule;
}

void parse_overrides(const ConfigNode& node, Config& config) {
  expect_kind(node, ConfigNode::Kind::map, "'overrides'");
  for (const ConfigMember& member : node.members) {
    backend_name(member.key, member.key_origin, "'overrides'", false);
    const std::string& factory = expect_scalar(member.value, "the factory of override '" + member.key + "'");
    if (factory.empty()) config_error(member.value.origin, "override '" + member.key + "' names no factory");
    // Factories are looked up when configure() applies the overrides, after
    // plugins (which may add names) have been loaded.
    config.overrides[member.key] = factory;
  }
}

void parse_plugins(const ConfigNode& node, const std::string& file_name, Config& config) {
  expect_kind(node, ConfigNode::Kind::sequence, "'plugins'");
  const std::filesystem::path base_dir = std::filesystem::path(file_name).parent_path();
  for (const ConfigNode& item : node.items) {
    const std::string& text = expect_scalar(item, "each entry of 'plugins'");
    if (text.empty()) config_error(item.origin, "a plugin path must not be empty");
    std::filesystem::path path(text);
    // Relative paths belong to the YAML file that wrote them, not to
    // whatever directory the program happens to run in. A path that starts
    // with a variable (${MLA_PLUGIN_DIR}) is kept as written; the plugin
    // loader expands it.
    if (path.is_relative() && text.rfind("${", 0) != 0) path = (base_dir / path).lexically_normal();
    std::string resolved = path.string();
    if (std::find(config.plugins.begin(), config.plugins.end(), resolved) == config.plugins.end()) {
      config.plugins.push_back(std::move(resolved));
    }
  }
}

void parse_logging(const ConfigNode& node, Config& config) {
  expect_kind(node, ConfigNode::Kind::map, "'logging'");
  detail::check_keys(node, {"level"}, "'logging'");
  if (const ConfigNode* level = node.find("level")) {
    const std::string& text = expect_scalar(*level, "'logging.level'");
    try {
      config.log_level = parse_log_level(text);
    } catch (const Error& error) {
      config_error(level->origin, std::string("'logging.level': ") + error.what());
    }
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    raise(ErrorCategory::io, "Cannot read configuration file '" + path +
                                 "': " + (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) raise(ErrorCategory::io, "Cannot read configuration file '" + path + "'");
  return text.str();
}

const char* non_empty_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// $MLA_PLUGINS: colon-separated plugin paths, loaded after the YAML file's.
// Relative entries are relative to the working directory (an environment
// variable has no file to be relative to).
void add_env_plugins(const std::string& list, Config& config) {
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(':', start), list.size());
    std::string entry = list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;  // "a.so::b.so" or a trailing colon
    if (std::find(config.plugins.begin(), config.plugins.end(), entry) == config.plugins.end()) {
      config.plugins.push_back(std::move(entry));
    }
  }
  config.sources.push_back("MLA_PLUGINS");
}

}  // namespace

std::string ConfigOrigin::describe() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

bool PriorityRule::matches(const DeviceCapability& capability) const {
  if (capability.vendor != vendor) return false;
  if (!min_capability && !max_capability) return true;
  if (!capability.capability_known) return false;
  const int value = capability.as_int();
  return (!min_capability || value >= *min_capability) && (!max_capability || value <= *max_capability);
}

const PriorityRule* Config::rule_for(const DeviceCapability& capability) const {
  for (const PriorityRule& rule : priorities) {
    if (rule.matches(capability)) return &rule;
  }
  return nullptr;
}

Config Config::builtin_defaults() {
  static const Config defaults = parse_yaml(detail::default_config_yaml, builtin_defaults_name, Config{});
  return defaults;
}

Config Config::parse_yaml(const std::string& text, const std::string& file_name, Config base) {
  Config config = std::move(base);
  const ConfigNode root = detail::parse_yaml_tree(text, file_name);
  config.sources.push_back(file_name);
  if (root.kind == ConfigNode::Kind::null) return config;  // an empty file changes nothing

  expect_kind(root, ConfigNode::Kind::map, "the top level of a configuration");
  detail::check_keys(root, {"backend", "default_backend", "logging", "priorities", "overrides", "plugins"},
                     "the top level");
  for (const ConfigMember& member : root.members) {
    const ConfigNode& value = member.value;
    if (member.key == "backend") {
      config.backend = backend_name(value, "'backend'", true);
      config.backend_origin = value.origin;
    } else if (member.key == "default_backend") {
      config.default_backend = backend_name(value, "'default_backend'", false);
    } else if (member.key == "logging") {
      parse_logging(value, config);
    } else if (member.key == "priorities") {
      // A file's list replaces the one below it: rules are tried in order and
      // the first match wins, so appended rules could never take effect.
      expect_kind(value, ConfigNode::Kind::sequence, "'priorities'");
      config.priorities.clear();
      for (const ConfigNode& item : value.items) config.priorities.push_back(parse_rule(item));
    } else if (member.key == "overrides") {
      parse_overrides(value, config);
    } else if (member.key == "plugins") {
      parse_plugins(value, file_name, config);
    }
  }
  return config;
}

Config Config::load_file(const std::string& path, Config base) {
  return parse_yaml(read_file(path), path, std::move(base));
}

Config resolve_config(const std::optional<std::string>& config_path) {
  Config config = Config::builtin_defaults();
  if (config_path) {
    config = Config::load_file(*config_path, std::move(config));
  } else if (const char* path = non_empty_env("MLA_CONFIG")) {
    config = Config::load_file(path, std::move(config));
  }
  if (const char* plugins = non_empty_env("MLA_PLUGINS")) add_env_plugins(plugins, config);
  if (const char* backend = non_empty_env("MLA_PREFILL_BACKEND")) {
    const ConfigOrigin origin{"MLA_PREFILL_BACKEND"};
    config.backend = backend_name(backend, origin, "", true);
    config.backend_origin = origin;
    config.sources.push_back("MLA_PREFILL_BACKEND");
  }
  return config;
}

}  // namespace mla
