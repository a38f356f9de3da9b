#include "mla/config.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <string>

#include "mla/error.hpp"

namespace mla {

namespace {

struct LogState {
  std::mutex mutex;
  LogSink sink;
  std::atomic<LogLevel> level{LogLevel::info};
  std::shared_ptr<spdlog::logger> logger;

  LogState() {
    // A private logger, not spdlog's default, so an application's own spdlog
    // setup is left alone. Its lines go to stderr so commands keep stdout clean.
    logger = std::make_shared<spdlog::logger>("mla", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    logger->set_pattern("[mla] [%l] %v");
    logger->set_level(spdlog::level::trace);
  }
};

LogState& state() {
  static LogState instance;
  return instance;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::trace:
      return spdlog::level::trace;
    case LogLevel::debug:
      return spdlog::level::debug;
    case LogLevel::info:
      return spdlog::level::info;
    case LogLevel::warn:
      return spdlog::level::warn;
    case LogLevel::error:
      return spdlog::level::err;
    case LogLevel::off:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::trace:
      return "trace";
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
    case LogLevel::off:
      return "off";
  }
  return "info";
}

LogLevel parse_log_level(std::string_view name) {
  for (LogLevel level :
       {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error, LogLevel::off}) {
    if (name == log_level_name(level)) return level;
  }
  raise(ErrorCategory::config,
        "Unknown log level: '" + std::string(name) + "'. Valid options are: trace, debug, info, warn, error, off");
}

void set_log_level(LogLevel level) { state().level.store(level); }

LogLevel log_level() { return state().level.load(); }

LogSink set_log_sink(LogSink sink) {
  std::lock_guard lock(state().mutex);
  std::swap(state().sink, sink);
  return sink;
}

void log(LogLevel level, std::string_view message) {
  LogState& s = state();
  if (level == LogLevel::off || level < s.level.load()) return;
  s.logger->log(to_spdlog(level), "{}", message);
  LogSink sink;
  {
    std::lock_guard lock(s.mutex);
    sink = s.sink;
  }
  if (sink) sink(level, message);
}

}  // namespace mla
