// Selector::report(): what the `mla-prefill backends` command prints.
#include <algorithm>

#include "mla/platform.hpp"
#include "selector/selector_fixture.hpp"

namespace mla::test {
namespace {

TEST_F(SelectorTest, ReportListsEveryMemberWithReasonsAndPriority) {
  fake("CUDA_FLASH", FakeSpec{}.capability_if(nvidia_80_plus).unavailable_because("built without CUDA"));
  fake("HIP_FLASH", FakeSpec{}.capability_if(amd_cdna).unavailable_because("built without HIP"));
  Selector selector(Config::builtin_defaults());
  const std::vector<CandidateReport> reports = selector.report(bf16, hopper);
  ASSERT_EQ(reports.size(), 5u);  // CUSTOM is not registered
  EXPECT_EQ(reports[0].name, "REFERENCE");
  EXPECT_EQ(reports[0].priority, 3);
  EXPECT_TRUE(reports[0].reasons.empty());
  EXPECT_EQ(reports[1].name, "KOKKOS");
  EXPECT_EQ(reports[1].priority, 2);
  EXPECT_EQ(reports[2].name, "CUDA_FLASH");
  EXPECT_EQ(reports[2].priority, 1);
  EXPECT_FALSE(reports[2].availability.available);
  EXPECT_EQ(reports[2].availability.reason, "built without CUDA");
  EXPECT_EQ(reports[2].reasons, std::vector<std::string>{"required dependencies not available (built without CUDA)"});
  EXPECT_EQ(reports[3].name, "HIP_FLASH");
  EXPECT_EQ(reports[3].priority, -1);  // not in nvidia's list
  EXPECT_EQ(reports[3].reasons, (std::vector<std::string>{"compute capability 9.0 not supported",
                                                          "required dependencies not available (built without HIP)"}));
  EXPECT_EQ(reports[4].name, "HOPPER_FLASH");
  EXPECT_EQ(reports[4].priority, 0);  // heads the 9.0 list
}

TEST_F(SelectorTest, DeviceCodeGapsShowInReportsAndWalks) {
  // Built with HIP, but without a code object for this gfx arch.
  fake("HIP_FLASH", FakeSpec{}.capability_if(amd_cdna).no_device_code_because("no code object for gfx942"));
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, mi300);
  EXPECT_EQ(selection.name, "KOKKOS");
  ASSERT_EQ(selection.walk.size(), 2u);
  EXPECT_FALSE(selection.walk[0].availability.available);
  EXPECT_EQ(selection.walk[0].availability.reason, "no code object for gfx942");
  EXPECT_EQ(selection.walk[0].reasons,
            std::vector<std::string>{"required dependencies not available (no code object for gfx942)"});

  // On a device the backend does not support, only the capability is the reason.
  for (const CandidateReport& report : selector.report(bf16, hopper)) {
    if (report.name != "HIP_FLASH") continue;
    EXPECT_TRUE(report.availability.available);
    EXPECT_EQ(report.reasons, std::vector<std::string>{"compute capability 9.0 not supported"});
  }
}

TEST_F(SelectorTest, ReportShowsCustomOnceRegistered) {
  Selector selector(Config::builtin_defaults());
  fake("CUSTOM", FakeSpec{}.only_dtypes({DType::float32}));
  const std::vector<CandidateReport> reports = selector.report(bf16, mi300);
  ASSERT_EQ(reports.size(), 6u);
  EXPECT_EQ(reports[5].name, "CUSTOM");
  EXPECT_EQ(reports[5].reasons, std::vector<std::string>{"dtype bfloat16 not supported"});
  EXPECT_EQ(reports[5].priority, -1);
}

// The real built-in table, no fakes: selection must not depend on what was
// compiled; a compiled-out backend is a candidate that says why it is not.
class BuiltinTableTest : public ::testing::Test {
 protected:
  RegistryReset reset_;
};

TEST_F(BuiltinTableTest, HostSelectionIsTheFirstValidOfItsList) {
  Selector selector(Config::builtin_defaults());
  const SelectorConfig request{DType::bfloat16, deepseek_dims};
  const std::vector<CandidateReport> reports = selector.report(request, host_capability());
  std::string expected;
  for (const char* name : {"KOKKOS", "REFERENCE"}) {
    for (const CandidateReport& report : reports) {
      if (expected.empty() && report.name == name && report.reasons.empty()) expected = name;
    }
  }
  ASSERT_FALSE(expected.empty()) << "REFERENCE must always be valid on the host";
  EXPECT_EQ(selector.select(request, host_capability()).name, expected);
}

TEST_F(BuiltinTableTest, CompiledOutGpuBackendsSayWhy) {
  Selector selector(Config::builtin_defaults());
  const SelectorConfig request{DType::bfloat16, deepseek_dims};
  for (const CandidateReport& report : selector.report(request, parse_platform("nvidia:9.0"))) {
#if !MLA_WITH_CUDA
    if (report.name == "CUDA_FLASH") {
      EXPECT_FALSE(report.availability.available);
      EXPECT_NE(std::find(report.reasons.begin(), report.reasons.end(),
                          "required dependencies not available (built without CUDA)"),
                report.reasons.end());
    }
#endif
#if !MLA_WITH_HIP
    if (report.name == "HIP_FLASH") {
      EXPECT_FALSE(report.availability.available);
      EXPECT_NE(std::find(report.reasons.begin(), report.reasons.end(),
                          "required dependencies not available (built without HIP)"),
                report.reasons.end());
    }
#endif
    if (report.name == "REFERENCE") {
      EXPECT_TRUE(report.reasons.empty());
    }
  }
}

}  // namespace
}  // namespace mla::test

namespace mla::test {

TEST_F(SelectorTest, ConfiguredLogLevelIsAppliedOnlyWhenSet) {
  Config quiet = Config::builtin_defaults();
  quiet.log_level = LogLevel::error;
  configure(quiet);
  EXPECT_EQ(log_level(), LogLevel::error);

  set_log_level(LogLevel::debug);
  configure(Config::builtin_defaults());  // no logging.level in the defaults
  EXPECT_EQ(log_level(), LogLevel::debug);
}

}  // namespace mla::test
