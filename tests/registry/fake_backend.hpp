// Fake registry entries for the control-plane tests: descriptions whose every
// answer the test chooses, with counters on each callback, so registry and
// selector behaviour is tested without any real kernel.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mla/backend.hpp"
#include "mla/backend/registry.hpp"
#include "mla/error.hpp"

namespace mla::test {

// A backend that can be built and named but refuses to compute.
class FakeBackend final : public PrefillBackend {
 public:
  FakeBackend(const BackendParams& params, std::string name) : PrefillBackend(params), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void merge_attn_states(Queue&, const MergeArgs&) const override {
    raise(ErrorCategory::not_supported, "fake backend " + name_ + " does not compute");
  }

 protected:
  void attend(Queue&, const AttentionCall&) const override {
    raise(ErrorCategory::not_supported, "fake backend " + name_ + " does not compute");
  }

 private:
  std::string name_;
};

// How often the selector asked a fake entry something.
struct FakeCounters {
  std::atomic<int> capability{0};
  std::atomic<int> availability{0};
  std::atomic<int> factory{0};
};

// What a fake entry answers; the defaults describe a backend valid for
// everything. Setters chain: FakeSpec{}.unavailable_because("built without CUDA").
struct FakeSpec {
  std::vector<DType> dtypes{DType::float16, DType::bfloat16};
  std::vector<MlaDims> dims;                                // empty: any
  std::function<bool(const DeviceCapability&)> capability;  // empty: any
  std::optional<std::string> unavailable;                   // reason, when not available
  std::optional<std::string> no_device_code;                // device_availability's refusal

  FakeSpec& only_dtypes(std::vector<DType> value) {
    dtypes = std::move(value);
    return *this;
  }
  FakeSpec& only_dims(std::vector<MlaDims> value) {
    dims = std::move(value);
    return *this;
  }
  FakeSpec& capability_if(std::function<bool(const DeviceCapability&)> value) {
    capability = std::move(value);
    return *this;
  }
  FakeSpec& unavailable_because(std::string reason) {
    unavailable = std::move(reason);
    return *this;
  }
  FakeSpec& no_device_code_because(std::string reason) {
    no_device_code = std::move(reason);
    return *this;
  }
};

inline BackendEntry make_fake_entry(const std::string& name, FakeSpec spec = {},
                                    std::shared_ptr<FakeCounters> counters = nullptr) {
  if (!counters) counters = std::make_shared<FakeCounters>();
  BackendDescription description;
  description.name = name;
  description.dtypes = spec.dtypes;
  description.dims = spec.dims;
  description.supports_capability = [counters, capability = spec.capability](const DeviceCapability& device) {
    ++counters->capability;
    return !capability || capability(device);
  };
  description.availability = [counters, unavailable = spec.unavailable]() {
    ++counters->availability;
    return unavailable ? Availability{false, *unavailable} : Availability{};
  };
  if (spec.no_device_code) {
    description.device_availability = [reason = *spec.no_device_code](const DeviceCapability&) {
      return Availability{false, reason};
    };
  }
  BackendFactory factory = [counters, name](const BackendParams& params) {
    ++counters->factory;
    return std::make_unique<FakeBackend>(params, name);
  };
  return {std::move(description), std::move(factory)};
}

// Clears every override of both registries when a test ends, whatever it did.
struct RegistryReset {
  RegistryReset() { reset(); }
  ~RegistryReset() { reset(); }
  RegistryReset(const RegistryReset&) = delete;
  RegistryReset& operator=(const RegistryReset&) = delete;
  static void reset() {
    mla_prefill_registry().clear_all_overrides();
    attention_registry().clear_all_overrides();
  }
};

}  // namespace mla::test
