// Auto-selection: the platform's priority list, first valid wins, and the
// error that lists every reason when none is (docs/contract.md §10, steps 3 and 4).
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "selector/selector_fixture.hpp"

namespace mla::test {
namespace {

TEST_F(SelectorTest, AutoPicksTheFirstValidBackend) {
  fake("CUDA_FLASH", FakeSpec{}.unavailable_because("built without CUDA"));
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, parse_platform("nvidia:8.0"));
  EXPECT_EQ(selection.name, "KOKKOS");
  EXPECT_NE(selection.why.find("first valid in the priority list for nvidia 8.0+"), std::string::npos) << selection.why;

  // The walk: CUDA_FLASH refused, KOKKOS taken, REFERENCE never considered.
  ASSERT_EQ(selection.walk.size(), 2u);
  EXPECT_EQ(selection.walk[0].name, "CUDA_FLASH");
  EXPECT_EQ(selection.walk[0].priority, 0);
  EXPECT_FALSE(selection.walk[0].availability.available);
  EXPECT_EQ(selection.walk[0].reasons,
            std::vector<std::string>{"required dependencies not available (built without CUDA)"});
  EXPECT_EQ(selection.walk[1].name, "KOKKOS");
  EXPECT_TRUE(selection.walk[1].reasons.empty());
  EXPECT_EQ(counters("REFERENCE").capability, 0);

  EXPECT_TRUE(logged(LogLevel::info, "Using KOKKOS MLA prefill backend."));
  EXPECT_TRUE(logged(LogLevel::debug, "CUDA_FLASH: [required dependencies not available (built without CUDA)]"));
}

TEST_F(SelectorTest, AutoOnHopperTakesTheFlashKernelWhenValid) {
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, hopper);
  EXPECT_EQ(selection.name, "CUDA_FLASH");
  // HOPPER_FLASH comes first on 9.0; the fixture's build has no sm_90a code.
  ASSERT_EQ(selection.walk.size(), 2u);
  EXPECT_EQ(selection.walk[0].name, "HOPPER_FLASH");
  EXPECT_FALSE(selection.walk[0].availability.available);
}

TEST_F(SelectorTest, PriorityOrderComesFromTheConfiguration) {
  const char* yaml_template =
      "priorities:\n"
      "  - vendor: nvidia\n"
      "    backends: [%s]\n";
  for (const auto& [list, expected] :
       std::vector<std::pair<std::string, std::string>>{{"REFERENCE, KOKKOS, CUDA_FLASH", "REFERENCE"},
                                                        {"KOKKOS, REFERENCE", "KOKKOS"},
                                                        {"CUDA_FLASH, REFERENCE", "CUDA_FLASH"}}) {
    std::string yaml = yaml_template;
    yaml.replace(yaml.find("%s"), 2, list);
    Selector selector(config_from(yaml));
    EXPECT_EQ(selector.select(bf16, hopper).name, expected) << list;
  }
}

TEST_F(SelectorTest, VendorDecidesTheListNotTheNumber) {
  // gfx90a and sm_90 both read 9.0; gfx1200 and sm_120 both read 12.0.
  Selector selector(Config::builtin_defaults());
  EXPECT_EQ(selector.select(bf16, parse_platform("amd:gfx90a")).name, "HIP_FLASH");
  EXPECT_EQ(selector.select(bf16, parse_platform("nvidia:9.0")).name, "CUDA_FLASH");
  EXPECT_EQ(selector.select(bf16, parse_platform("amd:gfx1200")).name, "KOKKOS");
  EXPECT_EQ(selector.select(bf16, parse_platform("nvidia:12.0")).name, "CUDA_FLASH");
  EXPECT_EQ(selector.select(bf16, turing).name, "KOKKOS");
  EXPECT_EQ(selector.select(bf16, host).name, "KOKKOS");
}

TEST_F(SelectorTest, FallsThroughToTheLastResort) {
  fake("HIP_FLASH", FakeSpec{}.only_dims({MlaDims{64, 64, 128}}));
  fake("KOKKOS", FakeSpec{}.only_dtypes({DType::float32}));
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, mi300);
  EXPECT_EQ(selection.name, "REFERENCE");
  ASSERT_EQ(selection.walk.size(), 3u);
  EXPECT_EQ(selection.walk[0].reasons.size(), 1u);
  EXPECT_EQ(selection.walk[1].reasons, std::vector<std::string>{"dtype bfloat16 not supported"});
}

TEST_F(SelectorTest, NoneValidListsEveryReason) {
  fake("CUDA_FLASH", FakeSpec{}.only_dtypes({DType::bfloat16}).unavailable_because("built without CUDA"));
  fake("KOKKOS", FakeSpec{}.only_dtypes({DType::bfloat16}));
  fake("REFERENCE", FakeSpec{}.capability_if([](const DeviceCapability&) { return false; }));
  Selector selector(Config::builtin_defaults());
  const SelectorConfig fp16{DType::float16, deepseek_dims};
  const std::string message = error_message([&] { selector.select(fp16, hopper); }, ErrorCategory::selection);
  EXPECT_EQ(
      message,
      "No valid MLA prefill backend found with " + to_string(fp16) +
          " on nvidia sm_90 (capability 9.0). Reasons: {HOPPER_FLASH: [required dependencies not available (built "
          "without sm_90a code)], CUDA_FLASH: [dtype float16 not supported, "
          "required dependencies not available (built without CUDA)], KOKKOS: [dtype float16 not "
          "supported], REFERENCE: [compute capability 9.0 not supported]}.");
}

TEST_F(SelectorTest, NoMatchingRuleIsAnErrorThatSaysSo) {
  Selector selector(config_from("priorities:\n  - vendor: host\n    backends: [REFERENCE]\n"));
  const std::string message = error_message([&] { selector.select(bf16, mi300); }, ErrorCategory::selection);
  EXPECT_NE(message.find("Reasons: {}."), std::string::npos) << message;
  EXPECT_NE(message.find("No priority rule of the configuration matches this platform"), std::string::npos) << message;
}

TEST_F(SelectorTest, UnregisteredCustomInAListIsSkippedWithItsReason) {
  Selector selector(config_from("priorities:\n  - vendor: nvidia\n    backends: [CUSTOM, KOKKOS]\n"));
  const Selection selection = selector.select(bf16, hopper);
  EXPECT_EQ(selection.name, "KOKKOS");
  ASSERT_EQ(selection.walk.size(), 2u);
  EXPECT_FALSE(selection.walk[0].availability.available);
  EXPECT_EQ(selection.walk[0].reasons, std::vector<std::string>{"MLA prefill backend CUSTOM must be registered before "
                                                                "use. Use register_mla_prefill_backend(...)"});
  fake("CUSTOM", FakeSpec{});
  EXPECT_EQ(selector.select(bf16, hopper).name, "CUSTOM");  // registration invalidated the cached choice
}

TEST_F(SelectorTest, OverridesFromTheConfigurationUseNamedFactories) {
  register_named_factory("TUNED_KOKKOS", make_fake_entry("TUNED_KOKKOS"), RegisterMode::replace);
  const Config config = config_from("overrides:\n  CUDA_FLASH: TUNED_KOKKOS\n");
  configure(config);
  Selector selector(config);
  EXPECT_TRUE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::CUDA_FLASH));
  const Selection selection = selector.select(bf16, hopper);
  EXPECT_EQ(selection.name, "CUDA_FLASH");  // the member keeps its place in the list
  EXPECT_EQ(selection.entry.description.name, "TUNED_KOKKOS");
  EXPECT_EQ(selector.create(selection, BackendParams{})->name(), "TUNED_KOKKOS");
  remove_named_factory("TUNED_KOKKOS");

  // Built-in names are factories too: KOKKOS bound to the real REFERENCE entry.
  configure(config_from("overrides: {KOKKOS: REFERENCE}\n"));
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).description.name, "REFERENCE");
}

TEST_F(SelectorTest, OverrideNamingNoFactoryFails) {
  const std::string message =
      error_message([&] { configure(config_from("overrides: {KOKKOS: NOT_LOADED}\n")); }, ErrorCategory::config);
  EXPECT_NE(message.find("NOT_LOADED"), std::string::npos) << message;
  EXPECT_NE(message.find("Known factories: REFERENCE, KOKKOS, CUDA_FLASH, HIP_FLASH, HOPPER_FLASH"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace mla::test
