// AMD gfx names -> capability (docs/contract.md §11), and the vendor-first rule that
// keeps gfx90a and sm_90 (both "9.0") apart.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "mla/platform.hpp"

namespace mla {
namespace {

TEST(StripAmdFeatures, RemovesEverythingAfterTheFirstColon) {
  EXPECT_EQ(strip_amd_features("gfx90a:sramecc+:xnack-"), "gfx90a");
  EXPECT_EQ(strip_amd_features("gfx942:sramecc+:xnack-"), "gfx942");
  EXPECT_EQ(strip_amd_features("gfx1100"), "gfx1100");
  EXPECT_EQ(strip_amd_features(" GFX90A:xnack+ "), "gfx90a");
  EXPECT_EQ(strip_amd_features(""), "");
}

struct ArchCase {
  const char* name;
  int major;
  int minor;
};

class AmdArchTable : public ::testing::TestWithParam<ArchCase> {};

TEST_P(AmdArchTable, MapsToCapability) {
  const ArchCase& c = GetParam();
  const auto capability = amd_arch_capability(c.name);
  ASSERT_TRUE(capability.has_value()) << c.name;
  EXPECT_EQ(*capability, std::make_pair(c.major, c.minor)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Contract, AmdArchTable,
                         ::testing::Values(ArchCase{"gfx90a", 9, 0}, ArchCase{"gfx942", 9, 4}, ArchCase{"gfx950", 9, 5},
                                           ArchCase{"gfx1100", 11, 0}, ArchCase{"gfx1200", 12, 0},
                                           ArchCase{"gfx908", 9, 0}, ArchCase{"gfx90c", 9, 0},
                                           ArchCase{"gfx1030", 10, 3}, ArchCase{"gfx1201", 12, 0},
                                           ArchCase{"gfx90a:sramecc+:xnack-", 9, 0}, ArchCase{"gfx942:xnack+", 9, 4},
                                           ArchCase{"gfx81", 8, 1}));

TEST(AmdArchCapability, RejectsNamesThatAreNotGfxArchs) {
  for (const char* name : {"", "gfx", "gfx9", "gfx12345", "sm_90", "9.0", "gfxabc", "gfx9a0", "gfx1a00", "gfx90a0x",
                           "nvidia", "gfx-90a"}) {
    EXPECT_FALSE(amd_arch_capability(name).has_value()) << "'" << name << "' should not parse";
  }
}

TEST(AmdArchCapability, SameNumbersOnBothVendorsStayDistinctDevices) {
  // gfx90a and sm_90 both read 9.0; gfx1200 and sm_120 both read 12.0. The
  // number alone must never decide: the vendor comes with it.
  const DeviceCapability mi250 = parse_platform("amd:gfx90a");
  const DeviceCapability h100 = parse_platform("nvidia:9.0");
  EXPECT_EQ(mi250.as_int(), h100.as_int());
  EXPECT_NE(mi250.vendor, h100.vendor);
  EXPECT_NE(mi250.describe(), h100.describe());

  const DeviceCapability rdna4 = parse_platform("amd:gfx1200");
  const DeviceCapability blackwell = parse_platform("nvidia:12.0");
  EXPECT_EQ(rdna4.as_int(), 120);
  EXPECT_EQ(blackwell.as_int(), 120);
  EXPECT_NE(rdna4.vendor, blackwell.vendor);
}

}  // namespace
}  // namespace mla
