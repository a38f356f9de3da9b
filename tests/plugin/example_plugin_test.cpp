// The example plugin loaded from its shared library, selected as CUSTOM and
// through a YAML override, run against REFERENCE, and cleared again.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "plugin_support.hpp"

namespace mla::plugin_test {
namespace {

namespace fs = std::filesystem;

const std::string example_plugin = MLA_EXAMPLE_PLUGIN;

class ExamplePlugin : public ::testing::Test {
 protected:
  // Loading is once per process; a test that cleared CUSTOM earlier in the
  // same process is undone from the factory the plugin also registered.
  void SetUp() override {
    load_plugin(example_plugin);
    restore_custom();
  }
  void TearDown() override {
    restore_custom();
    mla_prefill_registry().clear_override(MlaPrefillBackendKind::KOKKOS);
  }
  static void restore_custom() {
    const std::optional<BackendEntry> entry = find_named_factory("EXAMPLE_PLUGIN");
    ASSERT_TRUE(entry.has_value()) << "the example plugin registers the factory EXAMPLE_PLUGIN";
    register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, *entry, RegisterMode::replace);
  }
  static std::string custom_name() {
    return mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).description.name;
  }
};

TEST_F(ExamplePlugin, IsLoadedOnceUnderAnySpelling) {
  const std::vector<std::string> before = loaded_plugins();
  const std::string canonical = fs::canonical(example_plugin).string();
  EXPECT_EQ(std::count(before.begin(), before.end(), canonical), 1);
  const fs::path path(example_plugin);
  load_plugin((path.parent_path() / "." / path.filename()).string());
  load_plugin(example_plugin);
  EXPECT_EQ(loaded_plugins(), before);
  EXPECT_EQ(custom_name(), "EXAMPLE_PLUGIN");
}

TEST_F(ExamplePlugin, DescribesItselfThroughTheAbi) {
  const BackendDescription description = mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).description;
  EXPECT_EQ(description.name, "EXAMPLE_PLUGIN");
  EXPECT_EQ(description.dtypes, (std::vector<DType>{DType::float32, DType::float16, DType::bfloat16}));
  EXPECT_TRUE(description.dims.empty());
  EXPECT_FALSE(description.fp8_output);
  ASSERT_TRUE(description.availability);
  EXPECT_TRUE(description.availability().available);
  EXPECT_TRUE(validate(description, host_capability(), {DType::bfloat16, MlaDims{64, 64, 128}}).empty());
  EXPECT_EQ(validate(description, parse_platform("nvidia:9.0"), {DType::bfloat16, deepseek_dims}),
            (std::vector<std::string>{"compute capability 9.0 not supported"}));
  EXPECT_EQ(validate(description, host_capability(), {DType::float8_e4m3, deepseek_dims}),
            (std::vector<std::string>{"dtype float8_e4m3 not supported"}));
}

struct Case {
  DType dtype;
  MlaDims dims;
  int heads;
  bool causal;
};

TEST_F(ExamplePlugin, SelectedAsCustomMatchesReference) {
  // Odd lengths, an empty sequence, more keys than queries (bottom-right
  // causal), a chunk in which some sequences have no keys.
  const Case cases[] = {{DType::float32, {32, 16, 24}, 3, true},
                        {DType::float16, {64, 64, 128}, 2, true},
                        {DType::bfloat16, deepseek_dims, 4, true},
                        {DType::float32, deepseek_dims, 1, false}};
  std::mt19937_64 rng(20240611);
  Selector selector(Config::builtin_defaults());
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + to_string(c.dims) + (c.causal ? " causal" : ""));
    const Selection selection = selector.select({c.dtype, c.dims}, host_capability(), "CUSTOM");
    EXPECT_EQ(selection.name, "CUSTOM");
    EXPECT_EQ(selection.entry.description.name, "EXAMPLE_PLUGIN");
    BackendParams params;
    params.num_heads = c.heads;
    params.dims = c.dims;
    params.dtype = c.dtype;
    const std::unique_ptr<PrefillBackend> backend = selector.create(selection, params);
    EXPECT_EQ(backend->name(), "EXAMPLE_PLUGIN");
    EXPECT_FALSE(backend->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor));

    PrefillMetadata metadata = PrefillMetadata::from_lengths({1, 0, 17, 8}, {1, 0, 29, 8}, c.causal);
    metadata.add_chunk({3, 0, 11, 5});
    metadata.add_chunk({0, 2, 7, 1});
    const Step step = make_step(rng, params, std::move(metadata));
    expect_matches_reference(*backend, params, 1.0f / std::sqrt(static_cast<float>(c.dims.qk_head_dim())), step);
  }
}

TEST_F(ExamplePlugin, RefusesQuantisedOutputItCannotWrite) {
  BackendParams params;
  params.num_heads = 2;
  params.dtype = DType::bfloat16;
  const std::unique_ptr<PrefillBackend> backend =
      mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).factory(params);
  std::mt19937_64 rng(7);
  const Step step = make_step(rng, params, PrefillMetadata::from_lengths({5}, {5}));
  Queue queue = Queue::host();
  backend->prepare(queue, step.metadata);
  HostTensor out(DType::float8_e4m3, {5, 2, params.dims.v_head_dim});
  const std::string message = error_of(
      [&] { backend->run_new_tokens(queue, step.q.view, step.k.view, step.v.view, 0.1f, false, out.view, 0.5f); },
      ErrorCategory::not_supported);
  EXPECT_NE(message.find("EXAMPLE_PLUGIN cannot write float8_e4m3 output"), std::string::npos) << message;

  // The merge refuses it the same way, before the plugin is called: the
  // fp8 out keeps its poison.
  const std::int64_t dv = params.dims.v_head_dim;
  HostTensor prefix(DType::bfloat16, {5, 2, dv});
  HostTensor suffix(DType::bfloat16, {5, 2, dv});
  HostTensor prefix_lse(DType::float32, {2, 5});
  HostTensor suffix_lse(DType::float32, {2, 5});
  for (HostTensor* t : {&prefix, &suffix, &prefix_lse, &suffix_lse}) t->fill_random(rng, -1.0f, 1.0f);
  out.poison();
  const std::vector<std::byte> poisoned = out.storage;
  MergeArgs merge{prefix.view, prefix_lse.view, suffix.view, suffix_lse.view, out.view, {}, std::nullopt, 0.5f};
  const std::string merge_message =
      error_of([&] { backend->merge_attn_states(queue, merge); }, ErrorCategory::not_supported);
  EXPECT_NE(merge_message.find("EXAMPLE_PLUGIN cannot write float8_e4m3 merge output"), std::string::npos)
      << merge_message;
  EXPECT_EQ(out.storage, poisoned);
}

TEST_F(ExamplePlugin, SelectedThroughAYamlOverride) {
  const Config config = Config::parse_yaml("plugins: ['" + example_plugin + "']\noverrides: {KOKKOS: EXAMPLE_PLUGIN}\n",
                                           "override.yaml", Config::builtin_defaults());
  configure(config);
  Selector selector(config);
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).description.name, "EXAMPLE_PLUGIN");

  // Auto on the host walks [KOKKOS, REFERENCE]: KOKKOS is now the plugin.
  const Selection automatic = selector.select({DType::float32, deepseek_dims}, host_capability());
  EXPECT_EQ(automatic.name, "KOKKOS");
  EXPECT_EQ(automatic.entry.description.name, "EXAMPLE_PLUGIN");

  BackendParams params;
  params.num_heads = 2;
  params.dtype = DType::float32;
  const std::unique_ptr<PrefillBackend> backend = selector.create(automatic, params);
  EXPECT_EQ(backend->name(), "EXAMPLE_PLUGIN");
  std::mt19937_64 rng(99);
  PrefillMetadata metadata = PrefillMetadata::from_lengths({7, 13}, {7, 13});
  metadata.add_chunk({9, 0});
  expect_matches_reference(*backend, params, 0.07216878f, make_step(rng, params, std::move(metadata)));

  mla_prefill_registry().clear_override(MlaPrefillBackendKind::KOKKOS);
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).description.name, "KOKKOS");
}

TEST_F(ExamplePlugin, ClearedCustomStaysClearedUntilRegisteredAgain) {
  MlaPrefillRegistry& registry = mla_prefill_registry();
  registry.clear_override(MlaPrefillBackendKind::CUSTOM);
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::CUSTOM));
  const std::string message =
      error_of([&] { registry.resolve(MlaPrefillBackendKind::CUSTOM); }, ErrorCategory::not_found);
  EXPECT_NE(message.find("CUSTOM must be registered before use"), std::string::npos) << message;

  Selector selector(Config::builtin_defaults());
  error_of(
      [&] {
        selector.select({DType::float32, deepseek_dims}, host_capability(), "CUSTOM");
      },
      ErrorCategory::not_found);
  for (const CandidateReport& report : selector.report({DType::float32, deepseek_dims}, host_capability())) {
    EXPECT_NE(report.name, "CUSTOM");
  }

  // A plugin registers once per process: loading it again does not undo a clear.
  load_plugin(example_plugin);
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::CUSTOM));

  restore_custom();
  EXPECT_EQ(selector.select({DType::float32, deepseek_dims}, host_capability(), "CUSTOM").entry.description.name,
            "EXAMPLE_PLUGIN");
}

}  // namespace
}  // namespace mla::plugin_test
