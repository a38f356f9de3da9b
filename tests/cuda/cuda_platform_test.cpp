// Device detection through the CUDA runtime. On a machine without a GPU or
// driver (CI) detection must give an empty list without throwing, and a CUDA
// queue must fail with a clear Error(device).
#include <gtest/gtest.h>

#include <cstdlib>

#include "gpu_test_support.hpp"
#include "mla/platform.hpp"

namespace mla {
namespace {

TEST(CudaPlatform, DetectionNeverThrows) {
  std::vector<DeviceCapability> devices;
  ASSERT_NO_THROW(devices = detect_devices());
  if (devices.empty() && testing::gpu_required()) FAIL() << "no CUDA device (MLA_REQUIRE_GPU=1)";
  for (const DeviceCapability& device : devices) {
    EXPECT_EQ(device.vendor, Vendor::nvidia);
    EXPECT_TRUE(device.capability_known);
    EXPECT_FALSE(device.simulated);
    EXPECT_EQ(device.arch, "sm_" + std::to_string(device.major) + std::to_string(device.minor));
    EXPECT_EQ(device.warp_size, 32);
    EXPECT_GT(device.multiprocessors, 0);
    EXPECT_GT(device.memory_bytes, 0u);
    EXPECT_GE(device.shared_memory_per_block, 48u * 1024u);
    EXPECT_FALSE(device.name.empty());
  }
}

TEST(CudaPlatform, NoDeviceMeansHostPlatformAndAClearQueueError) {
  if (!detect_devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  if (std::getenv("MLA_PLATFORM") != nullptr) GTEST_SKIP() << "MLA_PLATFORM overrides the platform";
  EXPECT_EQ(current_platform().vendor, Vendor::host);
  EXPECT_EQ(Queue::default_queue().backend(), DeviceBackend::host);
  try {
    Queue queue(DeviceBackend::cuda, 0);
    FAIL() << "a CUDA queue without a device must not be created";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::device);
    const std::string message = error.what();
    EXPECT_TRUE(message.find("cudaGetDeviceCount failed") != std::string::npos ||
                message.find("no CUDA device 0") != std::string::npos)
        << message;
  }
}

TEST(CudaPlatform, QueueOnAMissingDeviceIndex) {
  MLA_REQUIRE_CUDA_DEVICE();
  const int count = static_cast<int>(detect_devices().size());
  try {
    Queue queue(DeviceBackend::cuda, count);
    FAIL() << "device " << count << " does not exist";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::device);
    EXPECT_NE(std::string(error.what()).find("no CUDA device " + std::to_string(count)), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace mla
