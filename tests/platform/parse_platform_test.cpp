// MLA_PLATFORM values, simulated devices, host detection and current_platform().
#include <gtest/gtest.h>

#include <string>

#include "config/scoped_env.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"

namespace mla {
namespace {

TEST(ParsePlatform, NvidiaCapabilities) {
  const DeviceCapability hopper = parse_platform("nvidia:9.0");
  EXPECT_EQ(hopper.vendor, Vendor::nvidia);
  EXPECT_TRUE(hopper.capability_known);
  EXPECT_TRUE(hopper.simulated);
  EXPECT_EQ(hopper.major, 9);
  EXPECT_EQ(hopper.minor, 0);
  EXPECT_EQ(hopper.arch, "sm_90");
  EXPECT_EQ(hopper.warp_size, 32);
  EXPECT_EQ(hopper.as_int(), 90);
  EXPECT_EQ(hopper.capability_string(), "9.0");
  EXPECT_EQ(hopper.describe(), "nvidia sm_90 (capability 9.0)");

  const DeviceCapability blackwell = parse_platform("nvidia:10.0");
  EXPECT_EQ(blackwell.major, 10);
  EXPECT_EQ(blackwell.arch, "sm_100");
  EXPECT_EQ(blackwell.as_int(), 100);

  const DeviceCapability ada = parse_platform("nvidia:8.9");
  EXPECT_EQ(ada.arch, "sm_89");
  EXPECT_EQ(ada.capability_string(), "8.9");
}

TEST(ParsePlatform, AmdArchs) {
  const DeviceCapability mi300 = parse_platform("amd:gfx942");
  EXPECT_EQ(mi300.vendor, Vendor::amd);
  EXPECT_TRUE(mi300.capability_known);
  EXPECT_TRUE(mi300.simulated);
  EXPECT_EQ(mi300.major, 9);
  EXPECT_EQ(mi300.minor, 4);
  EXPECT_EQ(mi300.arch, "gfx942");
  EXPECT_EQ(mi300.warp_size, 64);  // CDNA runs wave64

  const DeviceCapability mi250 = parse_platform("amd:gfx90a:sramecc+:xnack-");
  EXPECT_EQ(mi250.arch, "gfx90a");  // feature suffixes stripped
  EXPECT_EQ(mi250.as_int(), 90);
  EXPECT_EQ(mi250.describe(), "amd gfx90a (capability 9.0)");

  const DeviceCapability rdna3 = parse_platform("amd:gfx1100");
  EXPECT_EQ(rdna3.major, 11);
  EXPECT_EQ(rdna3.minor, 0);
  EXPECT_EQ(rdna3.warp_size, 32);  // RDNA runs wave32
}

TEST(ParsePlatform, VendorAloneMeansCapabilityUnknown) {
  for (const char* spec : {"nvidia", "amd"}) {
    const DeviceCapability device = parse_platform(spec);
    EXPECT_FALSE(device.capability_known) << spec;
    EXPECT_TRUE(device.simulated) << spec;
    EXPECT_EQ(device.capability_string(), "unknown") << spec;
    EXPECT_EQ(device.describe(), std::string(spec) + " (capability unknown)");
  }
  EXPECT_EQ(parse_platform("nvidia").vendor, Vendor::nvidia);
  EXPECT_EQ(parse_platform("amd").vendor, Vendor::amd);
}

TEST(ParsePlatform, HostAndLenientSpelling) {
  const DeviceCapability host = parse_platform("host");
  EXPECT_EQ(host.vendor, Vendor::host);
  EXPECT_TRUE(host.capability_known);
  EXPECT_EQ(host.arch, "host");
  EXPECT_EQ(host.describe(), "host");

  // Surrounding blanks and upper-case vendors are what people type in shells.
  EXPECT_EQ(parse_platform("  NVIDIA:8.0 ").arch, "sm_80");
  EXPECT_EQ(parse_platform("AMD:GFX90A").arch, "gfx90a");
}

TEST(ParsePlatform, BadValuesRaiseConfigErrorsListingTheAcceptedForms) {
  for (const char* spec :
       {"", "intel", "intel:1.0", "nvidia:", "nvidia:9", "nvidia:sm_90", "nvidia:9.0.1", "nvidia:100.0", "nvidia:9.x",
        "nvidia:gfx90a", "amd:", "amd:9.0", "amd:gfx", "amd:sm_90", "host:9.0", "cuda:9.0"}) {
    try {
      parse_platform(spec);
      ADD_FAILURE() << "'" << spec << "' was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::config) << spec;
      const std::string message = error.what();
      EXPECT_NE(message.find("MLA_PLATFORM"), std::string::npos) << message;
      EXPECT_NE(message.find("'" + std::string(spec) + "'"), std::string::npos) << message;
      for (const char* form : {"host", "nvidia:9.0", "nvidia:10.0", "amd:gfx942", "amd:gfx90a:sramecc+:xnack-"}) {
        EXPECT_NE(message.find(form), std::string::npos) << "'" << form << "' missing from: " << message;
      }
    }
  }
}

TEST(HostCapability, IsAKnownHostPlatform) {
  const DeviceCapability host = host_capability();
  EXPECT_EQ(host.vendor, Vendor::host);
  EXPECT_TRUE(host.capability_known);
  EXPECT_FALSE(host.simulated);
  EXPECT_EQ(host.arch, "host");
  EXPECT_EQ(vendor_name(host.vendor), "host");
  EXPECT_EQ(vendor_name(Vendor::nvidia), "nvidia");
  EXPECT_EQ(vendor_name(Vendor::amd), "amd");
}

TEST(DetectDevices, NeverThrowsAndMatchesTheBuild) {
  std::vector<DeviceCapability> devices;
  ASSERT_NO_THROW(devices = detect_devices());
#if !MLA_WITH_CUDA && !MLA_WITH_HIP
  EXPECT_TRUE(devices.empty()) << "a host-only build sees no GPU";
#endif
  for (const DeviceCapability& device : devices) {
    EXPECT_NE(device.vendor, Vendor::host);
    EXPECT_FALSE(device.simulated);
    EXPECT_GT(device.warp_size, 1);
  }
}

TEST(CurrentPlatform, FollowsMlaPlatform) {
  {
    test::ScopedEnv env("MLA_PLATFORM", "amd:gfx950");
    const DeviceCapability device = current_platform();
    EXPECT_EQ(device.vendor, Vendor::amd);
    EXPECT_EQ(device.as_int(), 95);
    EXPECT_TRUE(device.simulated);
  }
  {
    test::ScopedEnv env("MLA_PLATFORM", "nvidia");
    EXPECT_FALSE(current_platform().capability_known);
  }
  {
    test::ScopedEnv env("MLA_PLATFORM", "gpu-please");
    EXPECT_THROW(current_platform(), Error);
  }
}

TEST(CurrentPlatform, WithoutMlaPlatformIsTheFirstDeviceOrTheHost) {
  test::ScopedEnv env("MLA_PLATFORM", std::nullopt);
  const std::vector<DeviceCapability> devices = detect_devices();
  const DeviceCapability device = current_platform();
  EXPECT_FALSE(device.simulated);
  if (devices.empty()) {
    EXPECT_EQ(device.vendor, Vendor::host);
  } else {
    EXPECT_EQ(device.describe(), devices.front().describe());
  }
}

TEST(CurrentPlatform, EmptyMlaPlatformIsIgnored) {
  test::ScopedEnv env("MLA_PLATFORM", "");
  EXPECT_NO_THROW(current_platform());
  EXPECT_FALSE(current_platform().simulated);
}

}  // namespace
}  // namespace mla
