// The selector's cache: one evaluation per (vendor, capability, dtype, dims,
// explicit choice), invalidated by clear_cache() and by registry changes.
#include <atomic>
#include <thread>

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
