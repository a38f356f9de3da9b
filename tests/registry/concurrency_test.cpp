// Registries used from several threads at once: registering, resolving,
// clearing and selecting must neither crash nor ever return a torn entry.
// (vLLM's override dict has no lock; ours must not need the caller to add one.)
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "mla/backend/registry.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "registry/fake_backend.hpp"

namespace mla {
namespace {

constexpr int thread_count = 6;
constexpr int iterations = 400;

TEST(RegistryConcurrency, RegisterResolveClearFromManyThreads) {
  test::RegistryReset reset;
  auto& registry = mla_prefill_registry();
  std::atomic<int> torn{0};
  std::atomic<int> unexpected{0};
  std::atomic<bool> go{false};

  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      const std::string mine = "CUSTOM_" + std::to_string(t);
      const std::string factory_name = "CONCURRENT_" + std::to_string(t);
      for (int i = 0; i < iterations; ++i) {
        try {
          switch ((i + t) % 5) {
            case 0:
              register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, test::make_fake_entry(mine));
              break;
            case 1: {
              // Someone's CUSTOM or none at all, never a half-written one.
              const BackendEntry entry = registry.resolve(MlaPrefillBackendKind::CUSTOM);
              if (entry.description.name.rfind("CUSTOM_", 0) != 0 || !entry.factory) ++torn;
              break;
            }
            case 2:
              registry.clear_override(MlaPrefillBackendKind::CUSTOM);
              break;
            case 3: {
              const BackendEntry entry = registry.resolve(MlaPrefillBackendKind::REFERENCE);
              if (entry.description.name != "REFERENCE") ++torn;
              (void)registry.is_overridden(MlaPrefillBackendKind::REFERENCE);
              break;
            }
            case 4:
              register_named_factory(factory_name, test::make_fake_entry(factory_name), RegisterMode::replace);
              if (find_named_factory(factory_name)->description.name != factory_name) ++torn;
              remove_named_factory(factory_name);
              break;
          }
        } catch (const Error& error) {
          // The only expected failure: CUSTOM cleared by another thread.
          if (error.category() != ErrorCategory::not_found) ++unexpected;
        }
      }
    });
  }
  go = true;
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(torn, 0);
  EXPECT_EQ(unexpected, 0);
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::REFERENCE));
  for (int t = 0; t < thread_count; ++t) {
    EXPECT_FALSE(find_named_factory("CONCURRENT_" + std::to_string(t)).has_value());
  }
}

// Keeps the many "Using ..." lines of a stress test out of the output.
struct QuietLog {
  LogLevel previous = log_level();
  QuietLog() { set_log_level(LogLevel::warn); }
  ~QuietLog() { set_log_level(previous); }
  QuietLog(const QuietLog&) = delete;
  QuietLog& operator=(const QuietLog&) = delete;
};

TEST(RegistryConcurrency, SelectorsAgreeWhileOverridesChange) {
  test::RegistryReset reset;
  QuietLog quiet;
  // The GPU members ahead of KOKKOS on 9.0 are unavailable fakes (whatever
  // this build compiled); KOKKOS is valid, so every selection must say
  // KOKKOS, from the cache or not.
  register_mla_prefill_backend(MlaPrefillBackendKind::KOKKOS, test::make_fake_entry("KOKKOS"));
  register_mla_prefill_backend(
      MlaPrefillBackendKind::CUDA_FLASH,
      test::make_fake_entry("CUDA_FLASH", test::FakeSpec{}.unavailable_because("built without CUDA")));
  register_mla_prefill_backend(
      MlaPrefillBackendKind::HOPPER_FLASH,
      test::make_fake_entry("HOPPER_FLASH", test::FakeSpec{}.unavailable_because("built without CUDA")));
  Config config = Config::builtin_defaults();
  Selector selector(config);
  const DeviceCapability platform = parse_platform("nvidia:9.0");
  std::atomic<int> wrong{0};
  std::atomic<bool> go{false};

  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < iterations / 4; ++i) {
        if (t == 0) {
          // Churn an unrelated member: bumps the registry generation and
          // invalidates the cache under the other threads' feet.
          register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, test::make_fake_entry("CUSTOM"));
          mla_prefill_registry().clear_override(MlaPrefillBackendKind::CUSTOM);
          continue;
        }
        const SelectorConfig request{i % 2 == 0 ? DType::bfloat16 : DType::float16, deepseek_dims};
        const Selection selection = selector.select(request, platform);
        if (selection.name != "KOKKOS" || selection.entry.description.name != "KOKKOS") ++wrong;
        if (t == 1 && i % 10 == 0) selector.clear_cache();
      }
    });
  }
  go = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace mla
