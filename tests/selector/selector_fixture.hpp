// Shared set-up of the selector tests: every built-in member replaced by a
// fake entry the test describes, log lines captured, registry restored after.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mla/backend/registry.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "registry/fake_backend.hpp"

namespace mla::test {

// Capability predicates of the fakes.
inline bool nvidia_80_plus(const DeviceCapability& device) {
  return device.vendor == Vendor::nvidia && device.as_int() >= 80;
}
inline bool hopper_only(const DeviceCapability& device) {
  return device.vendor == Vendor::nvidia && device.as_int() == 90;
}
inline bool amd_cdna(const DeviceCapability& device) { return device.vendor == Vendor::amd && device.major == 9; }

class SelectorTest : public ::testing::Test {
 protected:
  SelectorTest() {
    previous_level_ = log_level();
    set_log_level(LogLevel::debug);
    previous_sink_ = set_log_sink([this](LogLevel level, std::string_view message) {
      std::lock_guard lock(log_mutex_);
      log_lines_.push_back({level, std::string(message)});
    });
    // Valid for everything unless a test says otherwise.
    for (const char* name : {"REFERENCE", "KOKKOS", "CUDA_FLASH", "HIP_FLASH"}) fake(name, FakeSpec{});
    // HOPPER_FLASH heads the list of 9.0 only; as in a build without sm_90a
    // code, it steps aside there unless a test makes it valid.
    fake("HOPPER_FLASH", FakeSpec{}.capability_if(hopper_only).unavailable_because("built without sm_90a code"));
  }
  ~SelectorTest() override {
    set_log_sink(previous_sink_);
    set_log_level(previous_level_);
  }

  // Replaces member `name` (or fills CUSTOM) with a fake; returns its counters.
  std::shared_ptr<FakeCounters> fake(const std::string& name, FakeSpec spec) {
    auto counters = std::make_shared<FakeCounters>();
    register_mla_prefill_backend(mla_prefill_registry().parse(name), make_fake_entry(name, std::move(spec), counters));
    counters_[name] = counters;
    return counters;
  }
  FakeCounters& counters(const std::string& name) { return *counters_.at(name); }

  // Whether a captured line at `level` contains `fragment`.
  bool logged(LogLevel level, const std::string& fragment) {
    std::lock_guard lock(log_mutex_);
    for (const auto& [line_level, line] : log_lines_) {
      if (line_level == level && line.find(fragment) != std::string::npos) return true;
    }
    return false;
  }

  // The message of the Error `fn` raises, checking its category.
  template <class Fn>
  static std::string error_message(Fn&& fn, ErrorCategory expected) {
    try {
      fn();
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), expected) << error.what();
      return error.what();
    }
    ADD_FAILURE() << "no error raised";
    return {};
  }

  static Config config_from(const std::string& yaml) {
    return Config::parse_yaml(yaml, "test.yaml", Config::builtin_defaults());
  }

  const SelectorConfig bf16{DType::bfloat16, deepseek_dims};
  const DeviceCapability hopper = parse_platform("nvidia:9.0");
  const DeviceCapability turing = parse_platform("nvidia:7.5");
  const DeviceCapability mi300 = parse_platform("amd:gfx942");
  const DeviceCapability host = host_capability();

 private:
  RegistryReset reset_;
  std::map<std::string, std::shared_ptr<FakeCounters>> counters_;
  LogLevel previous_level_ = LogLevel::info;
  LogSink previous_sink_;
  std::mutex log_mutex_;
  std::vector<std::pair<LogLevel, std::string>> log_lines_;
};

}  // namespace mla::test
