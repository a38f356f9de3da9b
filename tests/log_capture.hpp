// The library's log at debug level into `lines` for the life of the object,
// for tests that read what a call logged (split choices, launch schedules).
// Restored however the scope ends: a sink left behind by a test that threw
// would write into a vector that no longer exists during the next test.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mla/config.hpp"

namespace mla {

class ScopedLogCapture {
 public:
  explicit ScopedLogCapture(std::vector<std::string>& lines) : level_(log_level()) {
    set_log_level(LogLevel::debug);
    previous_ = set_log_sink([&lines](LogLevel, std::string_view line) { lines.emplace_back(line); });
  }
  ~ScopedLogCapture() {
    set_log_sink(previous_);
    set_log_level(level_);
  }
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;

 private:
  LogLevel level_;
  LogSink previous_;
};

}  // namespace mla
