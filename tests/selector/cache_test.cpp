// The selector's cache: one evaluation per (vendor, capability, dtype, dims,
// explicit choice), invalidated by clear_cache() and by registry changes,
// which configure() makes and constructing a Selector never does.
#include <atomic>
#include <thread>

#include "mla/backend/registration.hpp"
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "selector/selector_fixture.hpp"

namespace mla::test {
namespace {

TEST_F(SelectorTest, SecondSelectionComesFromTheCache) {
  fake("CUDA_FLASH", FakeSpec{}.unavailable_because("built without CUDA"));
  Selector selector(Config::builtin_defaults());
  const Selection first = selector.select(bf16, hopper);
  const int capability_calls = counters("CUDA_FLASH").capability;
  const int availability_calls = counters("KOKKOS").availability;
  EXPECT_GT(capability_calls, 0);

  const Selection second = selector.select(bf16, hopper);
  EXPECT_EQ(second.name, first.name);
  EXPECT_EQ(second.walk.size(), first.walk.size());
  EXPECT_EQ(counters("CUDA_FLASH").capability, capability_calls);
  EXPECT_EQ(counters("KOKKOS").availability, availability_calls);
  EXPECT_EQ(counters("KOKKOS").factory, 0);  // selection never builds a backend
}

TEST_F(SelectorTest, CacheKeySeparatesDtypeDimsPlatformAndChoice) {
  Selector selector(Config::builtin_defaults());
  selector.select(bf16, hopper);
  const int calls = counters("CUDA_FLASH").capability;

  selector.select({DType::float16, deepseek_dims}, hopper);  // other dtype
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls + 1);
  selector.select({DType::bfloat16, MlaDims{64, 64, 128}}, hopper);  // other dims
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls + 2);
  selector.select(bf16, parse_platform("nvidia:10.0"));  // other capability
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls + 3);
  selector.select(bf16, hopper, "CUDA_FLASH");  // explicit choice of the same backend
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls + 4);
  selector.select(bf16, hopper);  // back to the first key: cached
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls + 4);
}

TEST_F(SelectorTest, CachedSelectionCarriesTheCallersPlatform) {
  Selector selector(Config::builtin_defaults());
  DeviceCapability first_gpu = hopper;
  first_gpu.name = "GPU 0";
  DeviceCapability second_gpu = hopper;
  second_gpu.name = "GPU 1";
  selector.select(bf16, first_gpu);
  EXPECT_EQ(selector.select(bf16, second_gpu).platform.name, "GPU 1");
}

TEST_F(SelectorTest, ClearCacheForcesAFreshWalk) {
  Selector selector(Config::builtin_defaults());
  selector.select(bf16, hopper);
  const int calls = counters("CUDA_FLASH").capability;
  selector.clear_cache();
  selector.select(bf16, hopper);
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls + 1);
}

TEST_F(SelectorTest, RegistryChangesInvalidateCachedChoices) {
  Selector selector(Config::builtin_defaults());
  EXPECT_EQ(selector.select(bf16, hopper).entry.description.name, "CUDA_FLASH");
  fake("CUDA_FLASH", FakeSpec{}.unavailable_because("driver too old"));
  EXPECT_EQ(selector.select(bf16, hopper).name, "KOKKOS");
  mla_prefill_registry().clear_override(MlaPrefillBackendKind::CUDA_FLASH);
  fake("CUDA_FLASH", FakeSpec{});
  EXPECT_EQ(selector.select(bf16, hopper).name, "CUDA_FLASH");
}

// A Selector only keeps its config: the log level, overrides and plugins wait
// for configure(). Another Selector's cached choice survives, which any
// registry change (a new generation) would have emptied.
TEST_F(SelectorTest, ConstructionChangesNothingOutsideTheSelector) {
  Selector first(Config::builtin_defaults());
  first.select(bf16, hopper);
  const int calls = counters("CUDA_FLASH").capability;
  const LogLevel level = log_level();
  const std::vector<std::string> plugins = loaded_plugins();

  const Config overriding = config_from("logging:\n  level: error\noverrides: {CUDA_FLASH: REFERENCE}\n");
  ASSERT_TRUE(overriding.log_level.has_value());
  ASSERT_NE(*overriding.log_level, level);
  const Selector second(overriding);
  EXPECT_EQ(log_level(), level);
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUDA_FLASH).description.name, "CUDA_FLASH");
  EXPECT_EQ(second.config().overrides, overriding.overrides);  // kept for configure()

  // Neither a missing plugin nor an override naming no factory is looked at.
  Config broken = config_from("overrides: {HIP_FLASH: NOT_LOADED}\n");
  broken.plugins = {"missing-plugin.so"};
  EXPECT_NO_THROW({ const Selector third(broken); });
  EXPECT_EQ(loaded_plugins(), plugins);

  EXPECT_EQ(first.select(bf16, hopper).entry.description.name, "CUDA_FLASH");
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls) << "the registry changed: the cached choice was dropped";
}

// configure(), not the constructor, binds the overrides; a Selector built
// before sees them once they are bound, since binding empties its cache.
TEST_F(SelectorTest, ConfigureBindsTheOverridesInTheProcessRegistry) {
  register_named_factory("TUNED_CUDA", make_fake_entry("TUNED_CUDA"), RegisterMode::replace);
  const Config config = config_from("overrides: {CUDA_FLASH: TUNED_CUDA}\n");
  Selector selector(config);
  EXPECT_EQ(selector.select(bf16, hopper).entry.description.name, "CUDA_FLASH");

  configure(config);
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUDA_FLASH).description.name, "TUNED_CUDA");
  EXPECT_EQ(selector.select(bf16, hopper).entry.description.name, "TUNED_CUDA");

  EXPECT_NO_THROW(configure(config));  // again: the same binding
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUDA_FLASH).description.name, "TUNED_CUDA");
  remove_named_factory("TUNED_CUDA");
}

TEST_F(SelectorTest, ConfigureRefusesAnUnknownFactoryAndChangesNoRegistry) {
  Selector selector(Config::builtin_defaults());
  selector.select(bf16, hopper);
  const int calls = counters("CUDA_FLASH").capability;

  const std::string cuda_before = mla_prefill_registry().resolve(MlaPrefillBackendKind::CUDA_FLASH).description.name;
  // CUDA_FLASH comes first in member-name order and names a real factory; the
  // bad KOKKOS override after it must keep it from being bound too.
  const std::string message =
      error_message([&] { configure(config_from("overrides: {CUDA_FLASH: REFERENCE, KOKKOS: NOT_LOADED}\n")); },
                    ErrorCategory::config);
  EXPECT_NE(message.find("Override KOKKOS: NOT_LOADED names no registered factory"), std::string::npos) << message;
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).description.name, "KOKKOS");
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUDA_FLASH).description.name, cuda_before);
  selector.select(bf16, hopper);
  EXPECT_EQ(counters("CUDA_FLASH").capability, calls) << "the registry changed: the cached choice was dropped";
}

TEST_F(SelectorTest, FailuresAreNotCached) {
  fake("KOKKOS", FakeSpec{}.unavailable_because("built without Kokkos"));
  Selector selector(Config::builtin_defaults());
  EXPECT_THROW(selector.select(bf16, hopper, "KOKKOS"), Error);
  EXPECT_THROW(selector.select(bf16, hopper, "KOKKOS"), Error);
  EXPECT_EQ(counters("KOKKOS").capability, 2);  // validated afresh each time
}

TEST_F(SelectorTest, ConcurrentSelectionsShareOneAnswer) {
  fake("CUDA_FLASH", FakeSpec{}.unavailable_because("built without CUDA"));
  Selector selector(Config::builtin_defaults());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (selector.select(bf16, hopper).name != "KOKKOS") ++wrong;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, 0);
  // Threads may race on the first miss, but not beyond it.
  EXPECT_LE(counters("CUDA_FLASH").capability, 4);
}

}  // namespace
}  // namespace mla::test
