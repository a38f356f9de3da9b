// Layering of configuration sources: built-in defaults < YAML file (explicit
// path, else $MLA_CONFIG) < $MLA_PREFILL_BACKEND; and what each layer keeps,
// replaces or appends.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "config/scoped_env.hpp"
#include "mla/backend/registry.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"

namespace mla {
namespace {

namespace fs = std::filesystem;

// A directory of its own under the system temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::random_device random;
    path_ = fs::temp_directory_path() / ("mla-config-test-" + std::to_string(random()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The environment every test here starts from: none of our variables set.
struct CleanEnv {
  test::ScopedEnv config{"MLA_CONFIG", std::nullopt};
  test::ScopedEnv backend{"MLA_PREFILL_BACKEND", std::nullopt};
};

TEST(Layering, YamlChangesOnlyWhatItNames) {
  const Config base = Config::builtin_defaults();
  const Config config = Config::parse_yaml("default_backend: KOKKOS\n", "top.yaml", base);
  EXPECT_EQ(config.default_backend, "KOKKOS");
  EXPECT_EQ(config.backend, "auto");
  EXPECT_FALSE(config.log_level.has_value());
  EXPECT_EQ(config.priorities.size(), base.priorities.size());
  EXPECT_EQ(config.sources, (std::vector<std::string>{base.sources.front(), "top.yaml"}));
}

TEST(Layering, EmptyDocumentChangesNothing) {
  const Config base = Config::builtin_defaults();
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    const Config config = Config::parse_yaml(text, "empty.yaml", base);
    EXPECT_EQ(config.backend, base.backend);
    EXPECT_EQ(config.priorities.size(), base.priorities.size());
    EXPECT_EQ(config.sources.back(), "empty.yaml");
  }
}

TEST(Layering, BackendRecordsWhereItWasSet) {
  const Config config =
      Config::parse_yaml("# choose\nbackend:   KOKKOS\n", "conf/top.yaml", Config::builtin_defaults());
  EXPECT_EQ(config.backend, "KOKKOS");
  EXPECT_EQ(config.backend_origin.describe(), "conf/top.yaml:2:12");
}

TEST(Layering, PrioritiesReplaceOverridesMergePluginsAppend) {
  const Config lower = Config::parse_yaml("overrides: {KOKKOS: REFERENCE, CUDA_FLASH: MINE}\nplugins: [/opt/a.so]\n",
                                          "lower.yaml", Config::builtin_defaults());
  const Config upper = Config::parse_yaml(
      "priorities:\n  - vendor: host\n    backends: [REFERENCE]\n"
      "overrides: {KOKKOS: OTHER}\nplugins: [/opt/b.so, /opt/a.so]\nlogging: {level: warn}\n",
      "upper.yaml", lower);
  ASSERT_EQ(upper.priorities.size(), 1u);
  EXPECT_EQ(upper.priorities[0].backends, (std::vector<std::string>{"REFERENCE"}));
  EXPECT_EQ(upper.rule_for(parse_platform("nvidia:9.0")), nullptr);
  EXPECT_EQ(upper.overrides, (std::map<std::string, std::string>{{"CUDA_FLASH", "MINE"}, {"KOKKOS", "OTHER"}}));
  EXPECT_EQ(upper.plugins, (std::vector<std::string>{"/opt/a.so", "/opt/b.so"}));
  EXPECT_EQ(upper.log_level, std::optional<LogLevel>{LogLevel::warn});
  EXPECT_EQ(upper.sources.size(), 3u);
}

TEST(Layering, ErrorsLeaveTheBaseUntouched) {
  const Config base = Config::builtin_defaults();
  EXPECT_THROW(Config::parse_yaml("backend: KOKKOS\nbogus: 1\n", "bad.yaml", base), Error);
  EXPECT_EQ(base.backend, "auto");
  EXPECT_EQ(base.sources.size(), 1u);
}

TEST(Plugins, RelativePathsResolveAgainstTheYamlDirectory) {
  const Config config = Config::parse_yaml("plugins: [libx.so, ../lib/liby.so, ./z/./libz.so, /abs/libw.so]\n",
                                           "deploy/conf/mla.yaml", Config::builtin_defaults());
  EXPECT_EQ(config.plugins, (std::vector<std::string>{"deploy/conf/libx.so", "deploy/lib/liby.so",
                                                      "deploy/conf/z/libz.so", "/abs/libw.so"}));
}

TEST(Plugins, RelativePathsOfALoadedFile) {
  TempDir dir;
  const std::string file = dir.write("etc/mla.yaml", "plugins:\n  - plugins/libmine.so\n");
  const Config config = Config::load_file(file, Config::builtin_defaults());
  ASSERT_EQ(config.plugins.size(), 1u);
  EXPECT_EQ(fs::path(config.plugins[0]), dir.path() / "etc" / "plugins" / "libmine.so");
}

TEST(ResolveConfig, DefaultsAloneWithoutEnvironment) {
  CleanEnv env;
  const Config config = resolve_config();
  EXPECT_EQ(config.backend, "auto");
  EXPECT_EQ(config.sources, Config::builtin_defaults().sources);
}

TEST(ResolveConfig, MlaConfigIsLayeredOverTheDefaults) {
  CleanEnv env;
  TempDir dir;
  const std::string file = dir.write("env.yaml", "backend: KOKKOS\n");
  test::ScopedEnv config_env("MLA_CONFIG", file);
  const Config config = resolve_config();
  EXPECT_EQ(config.backend, "KOKKOS");
  EXPECT_EQ(config.backend_origin.describe(), file + ":1:10");
  EXPECT_EQ(config.sources.size(), 2u);
  EXPECT_EQ(config.sources.back(), file);
  EXPECT_EQ(config.priorities.size(), Config::builtin_defaults().priorities.size());
}

TEST(ResolveConfig, AnExplicitPathBeatsMlaConfig) {
  CleanEnv env;
  TempDir dir;
  const std::string from_env = dir.write("env.yaml", "backend: KOKKOS\n");
  const std::string from_api = dir.write("api.yaml", "backend: HIP_FLASH\n");
  test::ScopedEnv config_env("MLA_CONFIG", from_env);
  const Config config = resolve_config(from_api);
  EXPECT_EQ(config.backend, "HIP_FLASH");
  EXPECT_EQ(config.sources.back(), from_api);
  for (const std::string& source : config.sources) EXPECT_NE(source, from_env);
}

TEST(ResolveConfig, MlaPrefillBackendBeatsTheFile) {
  CleanEnv env;
  TempDir dir;
  const std::string file = dir.write("env.yaml", "backend: KOKKOS\ndefault_backend: KOKKOS\n");
  test::ScopedEnv config_env("MLA_CONFIG", file);
  test::ScopedEnv backend_env("MLA_PREFILL_BACKEND", "CUDA_FLASH");
  const Config config = resolve_config();
  EXPECT_EQ(config.backend, "CUDA_FLASH");
  EXPECT_EQ(config.backend_origin.describe(), "MLA_PREFILL_BACKEND");
  EXPECT_EQ(config.default_backend, "KOKKOS");  // the file's other keys stay
  EXPECT_EQ(config.sources.back(), "MLA_PREFILL_BACKEND");
}

TEST(ResolveConfig, MlaPrefillBackendMayAskForAuto) {
  CleanEnv env;
  TempDir dir;
  test::ScopedEnv config_env("MLA_CONFIG", dir.write("env.yaml", "backend: KOKKOS\n"));
  test::ScopedEnv backend_env("MLA_PREFILL_BACKEND", "auto");
  EXPECT_EQ(resolve_config().backend, "auto");
}

TEST(ResolveConfig, EmptyVariablesAreIgnored) {
  CleanEnv env;
  test::ScopedEnv config_env("MLA_CONFIG", "");
  test::ScopedEnv backend_env("MLA_PREFILL_BACKEND", "");
  const Config config = resolve_config();
  EXPECT_EQ(config.backend, "auto");
  EXPECT_EQ(config.sources.size(), 1u);
}

TEST(ResolveConfig, BadEnvironmentValues) {
  CleanEnv env;
  {
    test::ScopedEnv backend_env("MLA_PREFILL_BACKEND", "FLASH_ATTN");
    try {
      resolve_config();
      ADD_FAILURE() << "MLA_PREFILL_BACKEND=FLASH_ATTN was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::config);
      EXPECT_EQ(std::string(error.what()),
                "MLA_PREFILL_BACKEND: Unknown MLA prefill backend: 'FLASH_ATTN'. Valid options are: REFERENCE, KOKKOS, "
                "CUDA_FLASH, HIP_FLASH, HOPPER_FLASH, CUSTOM (or auto)");
    }
  }
  {
    test::ScopedEnv config_env("MLA_CONFIG", "/nonexistent/mla.yaml");
    try {
      resolve_config();
      ADD_FAILURE() << "a missing MLA_CONFIG file was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::io);
      EXPECT_NE(std::string(error.what()).find("/nonexistent/mla.yaml"), std::string::npos);
    }
  }
}

// Failure injection: the file a process configured itself from disappears,
// or is caught half-written, before the next read. Each read is one clear
// error naming the file; what the process applied before stays as it was
// (the registry, selectors already built); the next good file works again.
TEST(Reload, AConfigFileThatDisappearsOrIsHalfWrittenChangesNothing) {
  const CleanEnv env;
  const TempDir dir;
  const std::string text = "backend: REFERENCE\noverrides:\n  KOKKOS: REFERENCE\n";
  const std::string path = dir.write("engine.yaml", text);
  configure(resolve_config(path));
  Selector selector(resolve_config(path));
  ASSERT_TRUE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::KOKKOS));
  const DeviceCapability host = host_capability();

  std::filesystem::remove(path);
  try {
    configure(resolve_config(path));
    ADD_FAILURE() << "a missing file was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  dir.write("engine.yaml", "backend: REFERENCE\noverrides:\n  KOKKOS: [REFERENCE\n");
  try {
    configure(resolve_config(path));
    ADD_FAILURE() << "a half-written file was read";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::config);
    EXPECT_NE(std::string(error.what()).find("engine.yaml:"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::KOKKOS));
  EXPECT_EQ(selector.select({DType::bfloat16, deepseek_dims}, host).name, "REFERENCE");

  dir.write("engine.yaml", "backend: auto\n");
  mla_prefill_registry().clear_override(MlaPrefillBackendKind::KOKKOS);
  const Config restored = resolve_config(path);
  configure(restored);
  EXPECT_EQ(restored.backend, "auto");
  EXPECT_FALSE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::KOKKOS));
}

}  // namespace
}  // namespace mla
