// Every configuration mistake is an Error(config) that says where it is
// (file:line:column) and what would have been accepted.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "mla/config.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

// Parses `yaml` as "bad.yaml" and checks the error message holds every fragment.
void expect_config_error(const std::string& yaml, std::initializer_list<std::string> fragments) {
  try {
    Config::parse_yaml(yaml, "bad.yaml", Config::builtin_defaults());
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::config) << error.what();
    const std::string message = error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' missing from: " << message;
    }
  }
}

TEST(YamlErrors, SyntaxErrorsCarryLineAndColumn) {
  expect_config_error("backend: auto\nlogging:\n  level: [info\n", {"bad.yaml:4:1:", "YAML syntax error"});
  expect_config_error("backend: auto\n  level: info\n", {"bad.yaml:2:8:", "YAML syntax error"});
  expect_config_error("priorities: {vendor: nvidia\n", {"bad.yaml:2:1:", "YAML syntax error"});
}

TEST(YamlErrors, UnknownTopLevelKeyListsTheValidOnes) {
  expect_config_error("backend: auto\nbakend: KOKKOS\n",
                      {"bad.yaml:2:1: unknown key 'bakend' in the top level. Valid keys: backend, default_backend, "
                       "logging, priorities, overrides, plugins"});
}

TEST(YamlErrors, UnknownNestedKeys) {
  expect_config_error("priorities:\n  - vendor: nvidia\n    backend: [KOKKOS]\n",
                      {"bad.yaml:3:5: unknown key 'backend' in a priority rule",
                       "Valid keys: vendor, min_capability, max_capability, backends"});
  expect_config_error("logging:\n  levle: debug\n", {"bad.yaml:2:3: unknown key 'levle'", "Valid keys: level"});
}

TEST(YamlErrors, DuplicateKeys) {
  expect_config_error("backend: auto\nbackend: KOKKOS\n", {"bad.yaml:2:1: duplicate key 'backend'"});
}

// A second document would otherwise be dropped without a word.
TEST(YamlErrors, MoreThanOneDocument) {
  expect_config_error("backend: REFERENCE\n---\nbackend: KOKKOS\n",
                      {"bad.yaml:2:1:", "the file holds more than one YAML document (separated by ---)"});
  // One document with an explicit start, a trailing empty document, and an
  // empty file are fine.
  EXPECT_EQ(Config::parse_yaml("backend: KOKKOS\n---\n", "trailing.yaml", Config::builtin_defaults()).backend,
            "KOKKOS");
  EXPECT_EQ(Config::parse_yaml("---\nbackend: KOKKOS\n", "one.yaml", Config::builtin_defaults()).backend, "KOKKOS");
  EXPECT_EQ(Config::parse_yaml("", "empty.yaml", Config::builtin_defaults()).backend,
            Config::builtin_defaults().backend);
  EXPECT_EQ(Config::parse_yaml("# only a comment\n", "comment.yaml", Config::builtin_defaults()).backend,
            Config::builtin_defaults().backend);
}

TEST(YamlErrors, WrongTypes) {
  expect_config_error("backend: [REFERENCE]\n", {"bad.yaml:1:10: 'backend' must be a scalar, got a sequence"});
  expect_config_error("backend:\n", {"'backend' must be a scalar, got an empty value"});
  expect_config_error("default_backend: {a: b}\n", {"bad.yaml:1:18: 'default_backend' must be a scalar, got a map"});
  expect_config_error("logging: info\n", {"bad.yaml:1:10: 'logging' must be a map, got a scalar"});
  expect_config_error("logging:\n  level: [info]\n", {"bad.yaml:2:10: 'logging.level' must be a scalar"});
  expect_config_error("priorities: KOKKOS\n", {"bad.yaml:1:13: 'priorities' must be a sequence, got a scalar"});
  expect_config_error("priorities:\n  - nvidia\n", {"bad.yaml:2:5: each entry of 'priorities' must be a map"});
  expect_config_error("priorities:\n  - vendor: host\n    backends: KOKKOS\n",
                      {"bad.yaml:3:15: 'backends' must be a sequence, got a scalar"});
  expect_config_error("overrides: [KOKKOS]\n", {"bad.yaml:1:12: 'overrides' must be a map, got a sequence"});
  expect_config_error("overrides:\n  KOKKOS: [REFERENCE]\n", {"bad.yaml:2:11:", "must be a scalar"});
  expect_config_error("plugins: libx.so\n", {"bad.yaml:1:10: 'plugins' must be a sequence, got a scalar"});
  expect_config_error("plugins:\n  - {path: x}\n", {"bad.yaml:2:5: each entry of 'plugins' must be a scalar"});
  expect_config_error("plugins: ['']\n", {"bad.yaml:1:11: a plugin path must not be empty"});
  expect_config_error("- backend: auto\n", {"bad.yaml:1:1: the top level of a configuration must be a map"});
  expect_config_error("just text\n", {"bad.yaml:1:1: the top level of a configuration must be a map, got a scalar"});
}

TEST(YamlErrors, UnknownBackendNames) {
  const std::string valid = "Valid options are: REFERENCE, KOKKOS, CUDA_FLASH, HIP_FLASH, HOPPER_FLASH, CUSTOM";
  expect_config_error("backend: FLASH_ATTN\n",
                      {"bad.yaml:1:10: 'backend': Unknown MLA prefill backend: 'FLASH_ATTN'. " + valid, "(or auto)"});
  expect_config_error("backend: reference\n", {"Unknown MLA prefill backend: 'reference'"});
  expect_config_error("default_backend: auto\n",
                      {"bad.yaml:1:18: 'default_backend': Unknown MLA prefill backend: 'auto'. " + valid});
  expect_config_error("priorities:\n  - vendor: nvidia\n    backends: [KOKKOS, TRTLLM_RAGGED]\n",
                      {"bad.yaml:3:24: 'backends': Unknown MLA prefill backend: 'TRTLLM_RAGGED'. " + valid});
  expect_config_error("overrides:\n  FLASHINFER: REFERENCE\n",
                      {"bad.yaml:2:3: 'overrides': Unknown MLA prefill backend: 'FLASHINFER'"});
}

TEST(YamlErrors, PriorityRuleContents) {
  expect_config_error("priorities:\n  - vendor: intel\n    backends: [KOKKOS]\n",
                      {"bad.yaml:2:13: unknown vendor 'intel'. Valid vendors: nvidia, amd, host"});
  expect_config_error("priorities:\n  - backends: [KOKKOS]\n", {"bad.yaml:2:5: a priority rule needs 'vendor'"});
  expect_config_error("priorities:\n  - vendor: amd\n", {"bad.yaml:2:5: a priority rule needs 'backends'"});
  expect_config_error("priorities:\n  - vendor: amd\n    backends: []\n",
                      {"bad.yaml:3:15: 'backends' must name at least one backend"});
  expect_config_error("priorities:\n  - vendor: amd\n    backends: [KOKKOS, REFERENCE, KOKKOS]\n",
                      {"bad.yaml:3:35: backend KOKKOS is listed twice"});
  expect_config_error("priorities:\n  - vendor: host\n    min_capability: \"8.0\"\n    backends: [KOKKOS]\n",
                      {"bad.yaml:3:21: 'min_capability' does not apply to vendor host"});
  expect_config_error(
      "priorities:\n  - vendor: amd\n    min_capability: \"9.5\"\n    max_capability: \"9.0\"\n    backends: "
      "[KOKKOS]\n",
      {"bad.yaml:2:5: min_capability 9.5 is above max_capability 9.0"});
}

TEST(YamlErrors, CapabilityStrings) {
  for (const char* bad : {"8", "eight", "8.10", "100.0", "8.0.1", ".5", "8.", "-8.0", "\"\"", "8..", "12..", "9.+"}) {
    expect_config_error(
        std::string("priorities:\n  - vendor: nvidia\n    min_capability: ") + bad + "\n    backends: [KOKKOS]\n",
        {"bad.yaml:3:21: 'min_capability' must be a capability like \"8.0\""});
  }
  // Quoted or not, "8.0" is the same capability.
  for (const char* good : {"8.0", "\"8.0\"", "'8.0'"}) {
    const Config config = Config::parse_yaml(
        std::string("priorities:\n  - vendor: nvidia\n    min_capability: ") + good + "\n    backends: [KOKKOS]\n",
        "ok.yaml", Config{});
    ASSERT_EQ(config.priorities.size(), 1u);
    EXPECT_EQ(config.priorities[0].min_capability, 80);
  }
  const Config two_digit = Config::parse_yaml(
      "priorities:\n  - vendor: nvidia\n    max_capability: '12.1'\n    backends: [KOKKOS]\n", "ok.yaml", Config{});
  EXPECT_EQ(two_digit.priorities[0].max_capability, 121);
}

TEST(YamlErrors, LogLevel) {
  expect_config_error("logging:\n  level: loud\n", {"bad.yaml:2:10: 'logging.level':", "loud", "debug", "warn"});
}

TEST(YamlErrors, MissingFileIsAnIoError) {
  try {
    Config::load_file("no/such/dir/mla.yaml", Config{});
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::io);
    EXPECT_NE(std::string(error.what()).find("no/such/dir/mla.yaml"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace mla
