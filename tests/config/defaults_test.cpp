// The built-in defaults: configs/default.yaml as compiled in, its priority
// rules per platform, and the example configurations that ship beside it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"

namespace mla {
namespace {

using Names = std::vector<std::string>;

const std::string source_dir = MLA_SOURCE_DIR;

Names rule_backends(const Config& config, const char* platform) {
  const PriorityRule* rule = config.rule_for(parse_platform(platform));
  return rule == nullptr ? Names{"<no rule>"} : rule->backends;
}

TEST(BuiltinDefaults, TopLevelValues) {
  const Config config = Config::builtin_defaults();
  EXPECT_EQ(config.backend, "auto");
  EXPECT_EQ(config.default_backend, "REFERENCE");
  EXPECT_FALSE(config.log_level.has_value());
  EXPECT_TRUE(config.overrides.empty());
  EXPECT_TRUE(config.plugins.empty());
  ASSERT_EQ(config.sources.size(), 1u);
  EXPECT_NE(config.sources.front().find("configs/default.yaml"), std::string::npos);
  EXPECT_NE(config.backend_origin.describe().find("configs/default.yaml"), std::string::npos);
  EXPECT_GT(config.backend_origin.line, 0);
}

TEST(BuiltinDefaults, PriorityListsPerPlatform) {
  const Config config = Config::builtin_defaults();
  const Names nvidia_flash{"CUDA_FLASH", "KOKKOS", "REFERENCE"};
  const Names hopper_flash{"HOPPER_FLASH", "CUDA_FLASH", "KOKKOS", "REFERENCE"};
  const Names amd_flash{"HIP_FLASH", "KOKKOS", "REFERENCE"};
  const Names portable{"KOKKOS", "REFERENCE"};

  EXPECT_EQ(rule_backends(config, "nvidia:8.0"), nvidia_flash);
  EXPECT_EQ(rule_backends(config, "nvidia:8.9"), nvidia_flash);
  EXPECT_EQ(rule_backends(config, "nvidia:9.0"), hopper_flash);
  EXPECT_EQ(rule_backends(config, "nvidia:10.0"), nvidia_flash);
  EXPECT_EQ(rule_backends(config, "nvidia:12.0"), nvidia_flash);
  EXPECT_EQ(rule_backends(config, "nvidia:7.5"), portable);
  EXPECT_EQ(rule_backends(config, "amd:gfx90a"), amd_flash);
  EXPECT_EQ(rule_backends(config, "amd:gfx942"), amd_flash);
  EXPECT_EQ(rule_backends(config, "amd:gfx950"), amd_flash);
  EXPECT_EQ(rule_backends(config, "amd:gfx908"), amd_flash);
  EXPECT_EQ(rule_backends(config, "amd:gfx1100"), portable);
  EXPECT_EQ(rule_backends(config, "amd:gfx1200"), portable);  // 12.0 like sm_120, but AMD
  EXPECT_EQ(rule_backends(config, "host"), portable);
  // A bounded rule cannot match an unknown capability; the vendor's catch-all can.
  EXPECT_EQ(rule_backends(config, "nvidia"), portable);
  EXPECT_EQ(rule_backends(config, "amd"), portable);
}

TEST(PriorityRule, BoundsAreInclusiveAndVendorComesFirst) {
  PriorityRule rule;
  rule.vendor = Vendor::amd;
  rule.min_capability = 90;
  rule.max_capability = 95;
  EXPECT_TRUE(rule.matches(parse_platform("amd:gfx90a")));
  EXPECT_TRUE(rule.matches(parse_platform("amd:gfx950")));
  EXPECT_FALSE(rule.matches(parse_platform("amd:gfx1030")));
  EXPECT_FALSE(rule.matches(parse_platform("nvidia:9.0")));  // same number, other vendor
  EXPECT_FALSE(rule.matches(parse_platform("amd")));
  EXPECT_FALSE(rule.matches(parse_platform("host")));

  PriorityRule upper_only;
  upper_only.vendor = Vendor::nvidia;
  upper_only.max_capability = 75;
  EXPECT_TRUE(upper_only.matches(parse_platform("nvidia:7.5")));
  EXPECT_FALSE(upper_only.matches(parse_platform("nvidia:8.0")));
}

TEST(BuiltinDefaults, EqualTheShippedFile) {
  // The compiled-in text is generated from configs/default.yaml; reading the
  // file must give the same rules (a stale build would not).
  const Config base;
  const Config from_file = Config::load_file(source_dir + "/configs/default.yaml", base);
  const Config builtin = Config::builtin_defaults();
  EXPECT_EQ(from_file.backend, builtin.backend);
  EXPECT_EQ(from_file.default_backend, builtin.default_backend);
  ASSERT_EQ(from_file.priorities.size(), builtin.priorities.size());
  for (std::size_t i = 0; i < builtin.priorities.size(); ++i) {
    EXPECT_EQ(from_file.priorities[i].vendor, builtin.priorities[i].vendor) << i;
    EXPECT_EQ(from_file.priorities[i].min_capability, builtin.priorities[i].min_capability) << i;
    EXPECT_EQ(from_file.priorities[i].max_capability, builtin.priorities[i].max_capability) << i;
    EXPECT_EQ(from_file.priorities[i].backends, builtin.priorities[i].backends) << i;
    EXPECT_EQ(from_file.priorities[i].origin.line, builtin.priorities[i].origin.line) << i;
  }
}

TEST(Examples, EveryShippedExampleLoads) {
  int count = 0;
  for (const auto& file : std::filesystem::directory_iterator(source_dir + "/configs/examples")) {
    if (file.path().extension() != ".yaml") continue;
    ++count;
    EXPECT_NO_THROW(Config::load_file(file.path().string(), Config::builtin_defaults())) << file.path();
  }
  EXPECT_GE(count, 2);
}

TEST(Examples, ExplicitReferenceAndCustomPriorities) {
  const Config explicit_reference =
      Config::load_file(source_dir + "/configs/examples/explicit-reference.yaml", Config::builtin_defaults());
  EXPECT_EQ(explicit_reference.backend, "REFERENCE");
  EXPECT_NE(explicit_reference.backend_origin.file.find("explicit-reference.yaml"), std::string::npos);

  const Config custom =
      Config::load_file(source_dir + "/configs/examples/custom-priorities.yaml", Config::builtin_defaults());
  EXPECT_EQ(rule_backends(custom, "nvidia:9.0"), (Names{"KOKKOS", "CUDA_FLASH", "REFERENCE"}));
  EXPECT_EQ(rule_backends(custom, "amd:gfx942"), (Names{"KOKKOS", "HIP_FLASH", "REFERENCE"}));
  EXPECT_EQ(custom.sources.size(), 2u);
}

}  // namespace
}  // namespace mla
