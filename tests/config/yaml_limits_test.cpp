// Inputs found by fuzzing the configuration reader (tests/fuzz, corpus
// tests/fuzz/corpus/config/crash-*): each once ended the process and now is
// one Error(config) that says what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mla/config.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

std::string config_error_of(const std::string& yaml) {
  try {
    Config::parse_yaml(yaml, "bad.yaml", Config::builtin_defaults());
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::config) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "accepted:\n" << yaml;
  return {};
}

// Nine lines whose aliases expand to 10^9 values: out of memory before.
TEST(YamlLimits, AliasBomb) {
  const std::string yaml =
      "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
      "a1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n"
      "a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\n"
      "a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]\n"
      "a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]\n"
      "a5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]\n"
      "a6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]\n"
      "a7: &a7 [*a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6]\n"
      "a8: &a8 [*a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7]\n";
  const std::string message = config_error_of(yaml);
  EXPECT_NE(message.find("bad.yaml:"), std::string::npos) << message;
  EXPECT_NE(message.find("more than 10000 values in one configuration"), std::string::npos) << message;
}

// An alias inside its own anchor: an endless tree, a stack overflow before.
TEST(YamlLimits, AliasCycle) {
  const std::string message = config_error_of("priorities: &a [*a]");
  EXPECT_NE(message.find("bad.yaml:1:13: values nested more than 64 levels deep"), std::string::npos) << message;
  EXPECT_NE(message.find("&a [*a]"), std::string::npos) << message;
}

// The limits leave room for any real configuration: aliases used a few times
// and nesting as deep as the format goes still read.
TEST(YamlLimits, OrdinaryAliasesStillWork) {
  const Config config = Config::parse_yaml(
      "priorities:\n"
      "  - vendor: nvidia\n"
      "    backends: &host_list [KOKKOS, REFERENCE]\n"
      "  - vendor: host\n"
      "    backends: *host_list\n",
      "ok.yaml", Config{});
  ASSERT_EQ(config.priorities.size(), 2u);
  EXPECT_EQ(config.priorities[1].backends, (std::vector<std::string>{"KOKKOS", "REFERENCE"}));
}

}  // namespace
}  // namespace mla
