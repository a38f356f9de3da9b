// Logging. The library logs through spdlog internally; nothing of spdlog leaks
// into the public headers. A sink lets applications and tests see the lines.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mla {

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

}  // namespace mla
