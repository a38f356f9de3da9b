// Explicit choices (API > MLA_PREFILL_BACKEND > YAML) and the unknown-capability
// rule (docs/contract.md §10, steps 1 and 2).
#include "config/scoped_env.hpp"
#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "selector/selector_fixture.hpp"

namespace mla::test {
namespace {

TEST_F(SelectorTest, UnknownCapabilityUsesTheDefaultWithoutValidation) {
  // The default refuses every request, and is still used: there is nothing to
  // validate against.
  fake("KOKKOS", FakeSpec{}.only_dtypes({}).unavailable_because("built without Kokkos"));
  Selector selector(config_from("default_backend: KOKKOS\n"));
  const Selection selection = selector.select(bf16, parse_platform("nvidia"));
  EXPECT_EQ(selection.name, "KOKKOS");
  EXPECT_EQ(selection.kind, MlaPrefillBackendKind::KOKKOS);
  EXPECT_EQ(counters("KOKKOS").capability, 0);
  EXPECT_NE(selection.why.find("default_backend"), std::string::npos) << selection.why;
  ASSERT_EQ(selection.walk.size(), 1u);
  EXPECT_TRUE(selection.walk[0].reasons.empty());
  EXPECT_TRUE(logged(LogLevel::info, "Device capability not available, using KOKKOS MLA prefill backend"));
}

TEST_F(SelectorTest, UnknownCapabilityBeatsAnExplicitChoiceAndSaysSo) {
  Selector selector(config_from("backend: CUDA_FLASH\n"));
  const Selection selection = selector.select(bf16, parse_platform("amd"));
  EXPECT_EQ(selection.name, "REFERENCE");
  EXPECT_TRUE(logged(LogLevel::warn, "CUDA_FLASH (from test.yaml:1:10) is ignored"));
}

TEST_F(SelectorTest, ExplicitValidChoiceFromTheApi) {
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, hopper, "REFERENCE");
  EXPECT_EQ(selection.name, "REFERENCE");
  EXPECT_EQ(selection.entry.description.name, "REFERENCE");
  EXPECT_EQ(selection.why, "explicit choice from API");
  EXPECT_EQ(selection.platform.describe(), hopper.describe());
  ASSERT_EQ(selection.walk.size(), 1u);
  EXPECT_EQ(selection.walk[0].priority, 3);  // fourth in nvidia 9.0's list
  EXPECT_TRUE(logged(LogLevel::info, "Using REFERENCE MLA prefill backend."));
  // Explicit means no walk: the list's first entry was never asked.
  EXPECT_EQ(counters("CUDA_FLASH").capability, 0);
}

TEST_F(SelectorTest, ExplicitInvalidChoiceFailsWithoutFallback) {
  fake("CUDA_FLASH", FakeSpec{}
                         .capability_if(nvidia_80_plus)
                         .only_dtypes({DType::float16, DType::bfloat16})
                         .unavailable_because("built without CUDA"));
  Selector selector(Config::builtin_defaults());
  const std::string message = error_message(
      [&] {
        selector.select({DType::float32, deepseek_dims}, turing, "CUDA_FLASH");
      },
      ErrorCategory::selection);
  EXPECT_EQ(message,
            "Selected MLA prefill backend CUDA_FLASH is not valid for this configuration. Reason: [compute capability "
            "7.5 not supported, dtype float32 not supported, required dependencies not available (built without CUDA)] "
            "(chosen by API)");
  // KOKKOS and REFERENCE were valid all along and were not tried.
  EXPECT_EQ(counters("KOKKOS").capability, 0);
  EXPECT_EQ(counters("REFERENCE").capability, 0);
}

TEST_F(SelectorTest, ExplicitChoiceFromYamlNamesTheLine) {
  fake("HIP_FLASH", FakeSpec{}.capability_if(amd_cdna));
  Selector selector(config_from("# explicit\nbackend: HIP_FLASH\n"));
  EXPECT_EQ(selector.select(bf16, mi300).why, "explicit choice from test.yaml:2:10");
  const std::string message = error_message([&] { selector.select(bf16, hopper); }, ErrorCategory::selection);
  EXPECT_EQ(message,
            "Selected MLA prefill backend HIP_FLASH is not valid for this configuration. Reason: [compute capability "
            "9.0 not supported] (chosen by test.yaml:2:10)");
}

TEST_F(SelectorTest, PrecedenceDefaultsYamlEnvironmentApi) {
  ScopedEnv no_file("MLA_CONFIG", std::nullopt);
  ScopedEnv env_backend("MLA_PREFILL_BACKEND", std::nullopt);
  const Config yaml = config_from("backend: KOKKOS\n");

  EXPECT_EQ(Selector(Config::builtin_defaults()).select(bf16, hopper).name, "CUDA_FLASH");  // defaults: auto
  EXPECT_EQ(Selector(yaml).select(bf16, hopper).name, "KOKKOS");                            // YAML
  {
    ScopedEnv env("MLA_PREFILL_BACKEND", "HIP_FLASH");
    Selector from_env(resolve_config());
    const Selection selection = from_env.select(bf16, mi300);
    EXPECT_EQ(selection.name, "HIP_FLASH");  // environment beats the defaults
    EXPECT_EQ(selection.why, "explicit choice from MLA_PREFILL_BACKEND");
    EXPECT_EQ(from_env.select(bf16, mi300, "REFERENCE").name, "REFERENCE");  // API beats the environment
  }
  // API "auto" beats an explicit configuration too.
  EXPECT_EQ(Selector(yaml).select(bf16, hopper, "auto").name, "CUDA_FLASH");
}

TEST_F(SelectorTest, UnknownExplicitNameIsTheRegistryError) {
  Selector selector(Config::builtin_defaults());
  EXPECT_EQ(error_message([&] { selector.select(bf16, hopper, "FLASH_ATTN"); }, ErrorCategory::not_found),
            "Unknown MLA prefill backend: 'FLASH_ATTN'. Valid options are: REFERENCE, KOKKOS, CUDA_FLASH, HIP_FLASH, "
            "HOPPER_FLASH, CUSTOM");
}

TEST_F(SelectorTest, ExplicitCustomMustBeRegistered) {
  Selector selector(Config::builtin_defaults());
  EXPECT_EQ(error_message([&] { selector.select(bf16, hopper, "CUSTOM"); }, ErrorCategory::not_found),
            "MLA prefill backend CUSTOM must be registered before use. Use register_mla_prefill_backend(...)");
  fake("CUSTOM", FakeSpec{});
  const Selection selection = selector.select(bf16, hopper, "CUSTOM");
  EXPECT_EQ(selection.name, "CUSTOM");
  EXPECT_EQ(selection.walk.at(0).priority, -1);  // not in any list
}

TEST_F(SelectorTest, ReasonsKeepTheContractOrder) {
  // All four reasons at once, in docs/contract.md §8 order.
  fake("KOKKOS", FakeSpec{}
                     .capability_if([](const DeviceCapability&) { return false; })
                     .only_dtypes({DType::bfloat16})
                     .unavailable_because("built without Kokkos")
                     .only_dims({deepseek_dims, MlaDims{64, 64, 128}}));
  Selector selector(Config::builtin_defaults());
  const SelectorConfig glm{DType::float16, MlaDims{192, 64, 256}};
  const std::string message = error_message([&] { selector.select(glm, hopper, "KOKKOS"); }, ErrorCategory::selection);
  const std::vector<std::string> in_order{"compute capability 9.0 not supported", "dtype float16 not supported",
                                          "required dependencies not available (built without Kokkos)",
                                          "Model does not have supported MLA dimensions (got " + to_string(glm.dims) +
                                              "; supported: " + to_string(deepseek_dims) + ", " +
                                              to_string(MlaDims{64, 64, 128}) + ")"};
  std::size_t at = 0;
  for (const std::string& reason : in_order) {
    const std::size_t found = message.find(reason, at);
    ASSERT_NE(found, std::string::npos) << "'" << reason << "' missing or out of order in: " << message;
    at = found + reason.size();
  }
}

TEST_F(SelectorTest, CreateBuildsTheSelectedBackend) {
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, hopper, "KOKKOS");
  EXPECT_EQ(counters("KOKKOS").factory, 0);  // selecting builds nothing
  const auto backend = selector.create(selection, BackendParams{});
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "KOKKOS");
  EXPECT_EQ(counters("KOKKOS").factory, 1);

  EXPECT_THROW(selector.create(Selection{}, BackendParams{}), Error);
  Selection broken = selection;
  broken.entry.factory = [](const BackendParams&) { return std::unique_ptr<PrefillBackend>(); };
  error_message([&] { selector.create(broken, BackendParams{}); }, ErrorCategory::internal);
}

// Creation builds only what was validated: params of another dtype or dims
// than the selection's request are an error naming both.
TEST_F(SelectorTest, CreateRefusesParamsUnlikeTheSelection) {
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, hopper, "KOKKOS");
  EXPECT_EQ(selection.request, bf16);
  BackendParams params;
  params.dtype = DType::float16;
  const std::string message =
      error_message([&] { selector.create(selection, params); }, ErrorCategory::invalid_argument);
  EXPECT_NE(
      message.find("Selection of KOKKOS was made for " + to_string(bf16) + " but the params ask for dtype=float16"),
      std::string::npos)
      << message;
  params.dtype = DType::bfloat16;
  params.dims = {64, 32, 64};
  EXPECT_NE(error_message([&] { selector.create(selection, params); }, ErrorCategory::invalid_argument)
                .find("qk_nope_head_dim=64"),
            std::string::npos);
  EXPECT_EQ(counters("KOKKOS").factory, 0) << "a refused creation builds nothing";
}

}  // namespace
}  // namespace mla::test
