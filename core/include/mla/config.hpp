// The library's configuration (which backend, priority lists per platform,
// overrides, logging) and its log. Configuration sources, lowest precedence
// first: built-in defaults (configs/default.yaml compiled in) < a YAML file <
// the environment (MLA_CONFIG names the file, MLA_PREFILL_BACKEND the
// backend) < API calls.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mla/queue.hpp"

namespace mla {

// Logging. The library logs through spdlog internally; nothing of spdlog leaks
// into the public headers. A sink lets applications and tests see the lines.
enum class LogLevel { trace, debug, info, warn, error, off };

std::string_view log_level_name(LogLevel level);
// Raises Error(config) listing the valid names.
LogLevel parse_log_level(std::string_view name);

void set_log_level(LogLevel level);
LogLevel log_level();

// Every line at or above the level also goes to `sink` (empty: none). Returns
// the previous sink.
using LogSink = std::function<void(LogLevel, std::string_view)>;
LogSink set_log_sink(LogSink sink);

void log(LogLevel level, std::string_view message);

// Where a value came from, for messages: "configs/x.yaml:3:12", "MLA_PREFILL_BACKEND".
struct ConfigOrigin {
  std::string file;  // file name, or the environment variable / "built-in defaults" / "API"
  int line = 0;      // 1-based; 0 when not from a file
  int column = 0;
  std::string describe() const;
};

// One priority list and the platforms it applies to (capability bounds inclusive).
struct PriorityRule {
  Vendor vendor = Vendor::host;
  std::optional<int> min_capability;  // as_int(): 80 for 8.0
  std::optional<int> max_capability;
  std::vector<std::string> backends;  // member names in order
  ConfigOrigin origin;
  bool matches(const DeviceCapability& capability) const;
};

struct Config {
  std::string backend = "auto";  // "auto" or a member name
  ConfigOrigin backend_origin{"built-in defaults"};
  std::string default_backend = "REFERENCE";     // used when the capability is unknown
  std::vector<PriorityRule> priorities;          // first matching rule wins
  std::map<std::string, std::string> overrides;  // member -> named factory
  std::vector<std::string> plugins;              // shared libraries, absolute or relative to the YAML, or
                                                 // starting with ${MLA_PLUGIN_DIR}; then $MLA_PLUGINS' entries
  // logging.level; unset leaves the process level alone (set_log_level, info
  // by default). configure() applies it.
  std::optional<LogLevel> log_level;
  std::vector<std::string> sources;  // what was layered, lowest first

  // configs/default.yaml as compiled into the library.
  static Config builtin_defaults();

  // Layers YAML text / a YAML file over `base`. Errors raise Error(config)
  // naming file, line and column; unknown keys list the valid ones.
  static Config parse_yaml(const std::string& text, const std::string& file_name, Config base);
  static Config load_file(const std::string& path, Config base);

  // The priority list for a platform: the first matching rule's backends, or
  // an empty list when none matches.
  const PriorityRule* rule_for(const DeviceCapability& capability) const;
};

// Built-in defaults, then `config_path` if given else $MLA_CONFIG if set, then
// $MLA_PLUGINS (colon-separated paths appended to `plugins`) and
// $MLA_PREFILL_BACKEND. API choices are applied by the caller on top.
// Nothing is loaded here: configure() loads `plugins`.
Config resolve_config(const std::optional<std::string>& config_path = std::nullopt);

}  // namespace mla
