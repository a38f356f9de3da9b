// Prefills running while other threads load the example plugin, bind and
// clear CUSTOM and override KOKKOS: every selection that succeeds builds the
// backend it names, and every run gives the right answer. Run it under the
// tsan preset to check the locking, not only the outcome.
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conformance/test_tensors.hpp"
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "plugin_support.hpp"

namespace mla::plugin_test {
namespace {

using testing::HostTensor;

TEST(PluginConcurrency, PrefillsRunWhileBackendsAndPluginsChange) {
  const LogLevel previous_level = log_level();
  set_log_level(LogLevel::warn);  // no "Using X" line per selection
  BackendParams params;
  params.num_heads = 2;
  params.dims = {16, 8, 16};
  params.dtype = DType::bfloat16;
  const PrefillMetadata meta = PrefillMetadata::from_lengths({5, 0, 9}, {5, 0, 9});
  std::mt19937_64 rng(11);
  HostTensor q(DType::bfloat16, {14, 2, 24}), k(DType::bfloat16, {14, 2, 24}), v(DType::bfloat16, {14, 2, 16});
  q.fill_random(rng, -2, 2);
  k.fill_random(rng, -2, 2);
  v.fill_random(rng, -1, 1);
  Queue host = Queue::host();
  auto reference = builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
  reference->prepare(host, meta);
  const AttentionResult expected = reference->run_new_tokens(host, q.view(), k.view(), v.view(), 0.2f, true);

  // A build without Kokkos refuses KOKKOS whenever the override below is cleared.
  const std::optional<BackendEntry> kokkos = builtin_mla_prefill_entry(MlaPrefillBackendKind::KOKKOS);
  const bool kokkos_built =
      kokkos && (!kokkos->description.availability || kokkos->description.availability().available);

  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, unexpected{0}, runs{0};
  std::vector<std::thread> threads;
  // Churn: the plugin (loaded once, later loads skipped), CUSTOM bound and cleared.
  threads.emplace_back([&] {
    while (!stop) {
      try {
        load_plugin(MLA_EXAMPLE_PLUGIN);
        if (const auto entry = find_named_factory("EXAMPLE_PLUGIN"))
          register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, *entry, RegisterMode::replace);
        mla_prefill_registry().clear_override(MlaPrefillBackendKind::CUSTOM);
      } catch (const Error& error) {
        ADD_FAILURE() << error.what();
        ++unexpected;
      }
    }
  });
  // Churn: KOKKOS overridden by REFERENCE and back.
  threads.emplace_back([&] {
    while (!stop) {
      register_mla_prefill_backend(MlaPrefillBackendKind::KOKKOS,
                                   *builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE));
      mla_prefill_registry().clear_override(MlaPrefillBackendKind::KOKKOS);
    }
  });
  const char* choices[] = {"KOKKOS", "REFERENCE", "CUSTOM"};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      Selector selector(Config::builtin_defaults());
      for (int i = 0; i < 60; ++i) {
        const char* choice = choices[(i + t) % 3];
        try {
          const Selection selection =
              selector.select({DType::bfloat16, params.dims}, host_capability(), std::string(choice));
          auto backend = selector.create(selection, params);
          if (backend->name() != selection.entry.description.name) ++wrong;
          backend->prepare(host, meta);
          const AttentionResult result = backend->run_new_tokens(host, q.view(), k.view(), v.view(), 0.2f, true);
          if (!testing::results_match(result.out, result.lse, expected.out, expected.lse,
                                      testing::tolerance_for(DType::bfloat16)))
            ++wrong;
          ++runs;
        } catch (const Error& error) {
          // CUSTOM cleared between two threads' steps is the one expected refusal
          // (and KOKKOS not overridden at that moment, without Kokkos).
          const bool expected_refusal =
              std::string(choice) == "CUSTOM" || (!kokkos_built && std::string(choice) == "KOKKOS");
          if (!expected_refusal) {
            ADD_FAILURE() << choice << ": " << error.what();
            ++unexpected;
          }
        }
      }
    });
  }
  for (std::size_t i = 2; i < threads.size(); ++i) threads[i].join();
  stop = true;
  threads[0].join();
  threads[1].join();
  mla_prefill_registry().clear_override(MlaPrefillBackendKind::KOKKOS);
  set_log_level(previous_level);

  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(unexpected, 0);
  EXPECT_GE(runs, kokkos_built ? 120 : 60);  // the KOKKOS (when built) and REFERENCE runs at least
}

}  // namespace
}  // namespace mla::plugin_test
