// HOPPER_FLASH in the built-in priority lists, on simulated platforms
// (parse_platform, as MLA_PLATFORM gives them): first on 9.0, refused with
// its reason elsewhere, CUDA_FLASH behind it everywhere. The fakes use the
// real capability predicate of backends/cuda/hopper_config.hpp.
#include "cuda/hopper_config.hpp"
#include "mla/platform.hpp"
#include "selector/selector_fixture.hpp"

namespace mla::test {
namespace {

class HopperSelection : public SelectorTest {
 protected:
  HopperSelection() { fake("HOPPER_FLASH", FakeSpec{}.capability_if(hopper_flash::supports_device)); }
};

TEST_F(HopperSelection, FirstOnComputeCapability90) {
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, parse_platform("nvidia:9.0"));
  EXPECT_EQ(selection.name, "HOPPER_FLASH");
  ASSERT_EQ(selection.walk.size(), 1u);
  EXPECT_EQ(selection.walk[0].priority, 0);
  EXPECT_TRUE(logged(LogLevel::info, "Using HOPPER_FLASH MLA prefill backend."));
}

TEST_F(HopperSelection, OtherArchesGetCudaFlashAndAnExplicitChoiceSaysWhyNot) {
  Selector selector(Config::builtin_defaults());
  for (const char* platform : {"nvidia:8.0", "nvidia:8.9", "nvidia:10.0", "nvidia:12.0"}) {
    const DeviceCapability device = parse_platform(platform);
    EXPECT_EQ(selector.select(bf16, device).name, "CUDA_FLASH") << platform;
    const std::string message =
        error_message([&] { selector.select(bf16, device, "HOPPER_FLASH"); }, ErrorCategory::selection);
    EXPECT_EQ(message,
              "Selected MLA prefill backend HOPPER_FLASH is not valid for this configuration. Reason: "
              "[compute capability " +
                  device.capability_string() + " not supported] (chosen by API)")
        << platform;
  }
  EXPECT_EQ(counters("HOPPER_FLASH").factory, 0);
}

TEST_F(HopperSelection, CudaFlashStaysSelectableOnHopper) {
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, parse_platform("nvidia:9.0"), "CUDA_FLASH");
  EXPECT_EQ(selection.name, "CUDA_FLASH");
  EXPECT_EQ(selection.walk[0].priority, 1);  // second in the 9.0 list
}

TEST_F(HopperSelection, FallsBackToCudaFlashWhenTheBuildHasNoSm90aCode) {
  fake("HOPPER_FLASH", FakeSpec{}
                           .capability_if(hopper_flash::supports_device)
                           .unavailable_because("built without sm_90a code (MLA_WITH_HOPPER_FLASH off)"));
  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select(bf16, parse_platform("nvidia:9.0"));
  EXPECT_EQ(selection.name, "CUDA_FLASH");
  ASSERT_EQ(selection.walk.size(), 2u);
  EXPECT_EQ(selection.walk[0].name, "HOPPER_FLASH");
  EXPECT_EQ(selection.walk[0].reasons,
            std::vector<std::string>{
                "required dependencies not available (built without sm_90a code (MLA_WITH_HOPPER_FLASH off))"});
}

TEST(HopperCapability, NinePointZeroOnly) {
  EXPECT_TRUE(hopper_flash::supports_device(parse_platform("nvidia:9.0")));
  for (const char* platform : {"nvidia:8.0", "nvidia:8.6", "nvidia:8.9", "nvidia:10.0", "nvidia:10.3", "nvidia:12.0",
                               "nvidia:7.5", "amd:gfx90a", "host"}) {
    const DeviceCapability device = parse_platform(platform);
    EXPECT_FALSE(hopper_flash::supports_device(device)) << platform;
    const std::string gap = hopper_flash::device_gap(device);
    EXPECT_NE(gap.find("compute capability 9.0"), std::string::npos) << gap;
    EXPECT_NE(gap.find(device.describe()), std::string::npos) << gap;
  }
  EXPECT_EQ(hopper_flash::device_gap(parse_platform("nvidia:9.0")), "");
}

}  // namespace
}  // namespace mla::test
