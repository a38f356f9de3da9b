// Plugins named by configuration: YAML `plugins:`, $MLA_PLUGINS, the
// ${MLA_PLUGIN_DIR} variable, and configure() as the one place that loads
// them.
#include <algorithm>
#include <filesystem>

#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "plugin_support.hpp"

namespace mla::plugin_test {
namespace {

namespace fs = std::filesystem;

const std::string example_plugin = MLA_EXAMPLE_PLUGIN;
const std::string example_file = fs::path(example_plugin).filename().string();

bool is_loaded(const std::string& path) {
  const std::vector<std::string> loaded = loaded_plugins();
  return std::find(loaded.begin(), loaded.end(), fs::canonical(path).string()) != loaded.end();
}

// No configuration from the environment of whoever runs the tests.
class PluginConfig : public ::testing::Test {
 protected:
  ScopedEnv config_{"MLA_CONFIG", std::nullopt};
  ScopedEnv plugins_{"MLA_PLUGINS", std::nullopt};
  ScopedEnv backend_{"MLA_PREFILL_BACKEND", std::nullopt};
  ScopedEnv plugin_dir_{"MLA_PLUGIN_DIR", std::nullopt};
};

TEST_F(PluginConfig, EnvironmentPluginsComeAfterTheYamlFile) {
  const TempDir dir;
  const std::string yaml = dir.write("mla.yaml", "plugins: [liba.so, /opt/shared.so]\n");
  const ScopedEnv env("MLA_PLUGINS", "/opt/b.so::/opt/shared.so:relative/c.so:");
  const Config config = resolve_config(yaml);
  EXPECT_EQ(config.plugins, (std::vector<std::string>{(fs::path(dir.path()) / "liba.so").string(), "/opt/shared.so",
                                                      "/opt/b.so", "relative/c.so"}));
  ASSERT_FALSE(config.sources.empty());
  EXPECT_EQ(config.sources.back(), "MLA_PLUGINS");
}

TEST_F(PluginConfig, ResolvingLoadsNothingAndConfigureLoadsEverything) {
  const std::string failing = MLA_TEST_PLUGIN_FAILING;
  const ScopedEnv env("MLA_PLUGINS", failing);
  const Config config = resolve_config();
  ASSERT_EQ(config.plugins, std::vector<std::string>{failing});
  configure(config);
  EXPECT_TRUE(is_loaded(failing));
  EXPECT_TRUE(find_named_factory("FAILING_TEST_FACTORY").has_value());
}

TEST_F(PluginConfig, ConfigureFailsOnABadPluginAndChangesNothing) {
  const TempDir dir;
  const std::string missing = dir.path() + "/libmissing.so";
  Config config = Config::builtin_defaults();
  config.plugins = {missing};
  config.overrides["KOKKOS"] = "REFERENCE";
  const RegistrySnapshot before = snapshot();
  const std::string message = error_of([&] { configure(config); }, ErrorCategory::plugin);
  EXPECT_EQ(message, "Cannot load plugin '" + missing + "': no such file");
  EXPECT_EQ(snapshot(), before) << "the overrides after a failed plugin must not be applied";
}

TEST_F(PluginConfig, YamlOverrideNamesAFactoryOfAPluginLoadedFirst) {
  const TempDir dir;
  const std::string yaml = dir.write("override.yaml", "plugins: ['" + std::string(MLA_TEST_PLUGIN_FAILING) +
                                                          "']\noverrides: {HIP_FLASH: FAILING_TEST_FACTORY}\n");
  const Config config = resolve_config(yaml);
  configure(config);
  Selector selector(config);
  MlaPrefillRegistry& registry = mla_prefill_registry();
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::HIP_FLASH).description.name, "FAILING_TEST");
  const std::string message = error_of(
      [&] {
        selector.select({DType::bfloat16, deepseek_dims}, parse_platform("amd:gfx942"), "HIP_FLASH");
      },
      ErrorCategory::selection);
  EXPECT_NE(message.find("Selected MLA prefill backend HIP_FLASH is not valid for this configuration. Reason: "
                         "[compute capability 9.4 not supported, required dependencies not available "
                         "(libtest_runtime.so.1 not found)]"),
            std::string::npos)
      << message;
  registry.clear_override(MlaPrefillBackendKind::HIP_FLASH);
}

TEST_F(PluginConfig, PluginDirVariable) {
  const std::string dir = fs::path(example_plugin).parent_path().string();
  const ScopedEnv env("MLA_PLUGIN_DIR", dir);
  EXPECT_EQ(plugin_dir(), dir);
  EXPECT_EQ(expand_plugin_path("${MLA_PLUGIN_DIR}/" + example_file), dir + "/" + example_file);
  EXPECT_EQ(expand_plugin_path("/abs/lib.so"), "/abs/lib.so");

  // YAML keeps the variable as written (it is not relative to the file) ...
  const std::string entry = "${MLA_PLUGIN_DIR}/" + example_file;
  const Config config = Config::parse_yaml("plugins: ['" + entry + "']\n", "conf/x.yaml", Config::builtin_defaults());
  ASSERT_EQ(config.plugins, std::vector<std::string>{entry});
  // ... and the loader expands it.
  configure(config);
  EXPECT_TRUE(is_loaded(example_plugin));

  const TempDir empty;
  const ScopedEnv elsewhere("MLA_PLUGIN_DIR", empty.path());
  const std::string message = error_of([&] { configure(config); }, ErrorCategory::plugin);
  EXPECT_EQ(message, "Cannot load plugin '" + empty.path() + "/" + example_file + "': no such file (expanded from '" +
                         entry + "')");
}

TEST_F(PluginConfig, OnlyALeadingPluginDirIsExpanded) {
  std::string message = error_of([] { expand_plugin_path("${HOME}/lib.so"); }, ErrorCategory::plugin);
  EXPECT_NE(message.find("only a leading ${MLA_PLUGIN_DIR} is expanded"), std::string::npos) << message;
  message = error_of([] { load_plugin("/opt/${MLA_PLUGIN_DIR}/lib.so"); }, ErrorCategory::plugin);
  EXPECT_NE(message.find("Cannot load plugin '/opt/${MLA_PLUGIN_DIR}/lib.so'"), std::string::npos) << message;
}

TEST_F(PluginConfig, DefaultPluginDirIsNextToLibmla) {
  if (!MLA_SHARED_LIBMLA) GTEST_SKIP() << "libmla is static in this build: the default is next to the executable";
  EXPECT_EQ(fs::canonical(plugin_dir()), fs::canonical(fs::path(MLA_LIBMLA_FILE).parent_path() / "mla" / "plugins"));
  EXPECT_TRUE(fs::equivalent(fs::path(plugin_dir()) / example_file, example_plugin))
      << "the build puts the example plugin where ${MLA_PLUGIN_DIR} points by default";
}

TEST_F(PluginConfig, ShippedExampleConfigurationWorks) {
  if (!MLA_SHARED_LIBMLA) GTEST_SKIP() << "the example configuration relies on the default ${MLA_PLUGIN_DIR}";
  const Config config = resolve_config(std::string(MLA_SOURCE_DIR) + "/configs/examples/plugin.yaml");
  configure(config);
  Selector selector(config);
  EXPECT_TRUE(is_loaded(example_plugin));
  for (const CandidateReport& report : selector.report({DType::bfloat16, deepseek_dims}, host_capability())) {
    if (report.name != "CUSTOM") continue;
    EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).description.name, "EXAMPLE_PLUGIN");
    EXPECT_TRUE(report.availability.available);
    EXPECT_TRUE(report.reasons.empty());
    return;
  }
  ADD_FAILURE() << "CUSTOM is not reported after loading configs/examples/plugin.yaml";
}

}  // namespace
}  // namespace mla::plugin_test
