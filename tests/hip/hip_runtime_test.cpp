// The HIP runtime behind the platform layer: device detection and queues.
// Detection must never throw, with or without a GPU; the device tests skip
// with a reason when there is none, and MLA_REQUIRE_GPU=1 makes that a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "mla/mla.hpp"

namespace mla {
namespace {

bool gpu_required() {
  const char* value = std::getenv("MLA_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

// Skips (or fails under MLA_REQUIRE_GPU=1) unless an AMD GPU is usable.
#define MLA_REQUIRE_HIP_DEVICE()                                       \
  do {                                                                 \
    std::string missing;                                               \
    if (!device_backend_built(DeviceBackend::hip))                     \
      missing = "this build has no HIP support";                       \
    else if (detect_devices().empty())                                 \
      missing = "no AMD GPU detected";                                 \
    if (!missing.empty()) {                                            \
      if (gpu_required()) FAIL() << missing << " (MLA_REQUIRE_GPU=1)"; \
      GTEST_SKIP() << missing;                                         \
    }                                                                  \
  } while (false)

TEST(HipRuntime, DetectionNeverThrows) {
  std::vector<DeviceCapability> devices;
  ASSERT_NO_THROW(devices = detect_devices());
  ASSERT_NO_THROW((void)detect_devices());  // a second call finds the runtime in the same state
  // A build with CUDA too reports NVIDIA GPUs beside AMD ones (seen on a CUDA
  // build with an H200); this test is about what the HIP runtime reports.
  for (const DeviceCapability& device : devices) {
    if (device.vendor != Vendor::amd) {
      EXPECT_TRUE(device_backend_built(DeviceBackend::cuda)) << "a non-AMD device from a build without CUDA";
      continue;
    }
    EXPECT_FALSE(device.simulated);
    EXPECT_EQ(device.arch.find(':'), std::string::npos) << "feature suffixes are stripped: " << device.arch;
    EXPECT_EQ(device.arch.rfind("gfx", 0), 0u) << device.arch;
    EXPECT_GT(device.multiprocessors, 0);
    EXPECT_TRUE(device.warp_size == 32 || device.warp_size == 64) << device.warp_size;
    EXPECT_GT(device.memory_bytes, 0u);
    EXPECT_GT(device.shared_memory_per_block, 0u);
  }
}

TEST(HipRuntime, WithoutDeviceThePlatformIsTheHost) {
  const std::vector<DeviceCapability> devices = detect_devices();
  if (std::any_of(devices.begin(), devices.end(), [](const DeviceCapability& d) { return d.vendor == Vendor::amd; }))
    GTEST_SKIP() << "an AMD GPU is present";
  if (!devices.empty()) GTEST_SKIP() << "another vendor's GPU is present: the platform is not the host";
  if (gpu_required()) FAIL() << "no AMD GPU detected (MLA_REQUIRE_GPU=1)";
  const char* platform = std::getenv("MLA_PLATFORM");
  if (platform == nullptr || *platform == '\0') {
    EXPECT_EQ(current_platform().vendor, Vendor::host);
  }
  EXPECT_EQ(Queue::default_queue().backend(), DeviceBackend::host);
}

TEST(HipRuntime, QueueWithoutDeviceIsAClearError) {
  const std::vector<DeviceCapability> devices = detect_devices();
  if (std::any_of(devices.begin(), devices.end(), [](const DeviceCapability& d) { return d.vendor == Vendor::amd; }))
    GTEST_SKIP() << "an AMD GPU is present";
  if (!devices.empty()) GTEST_SKIP() << "another vendor's GPU is present: the platform is not the host";
  try {
    Queue queue(DeviceBackend::hip, 0);
    FAIL() << "a HIP queue without a device: " << queue.describe();
  } catch (const Error& error) {
    const std::string message = error.what();
    if (device_backend_built(DeviceBackend::hip)) {
      EXPECT_EQ(error.category(), ErrorCategory::device) << message;
      EXPECT_NE(message.find("HIP"), std::string::npos) << message;
    } else {
      EXPECT_EQ(error.category(), ErrorCategory::not_supported) << message;
    }
  }
}

// An engine's hipStream_t: the borrowed queue enqueues on it in order with
// the owner's work and leaves it alive when it goes.
TEST(HipRuntime, BorrowedStreamIsUsedNotOwned) {
  MLA_REQUIRE_HIP_DEVICE();
  Queue owner(DeviceBackend::hip, 0);
  constexpr std::size_t count = 4099;
  std::vector<float> source(count), back(count, 0.0f);
  for (std::size_t i = 0; i < count; ++i) source[i] = static_cast<float>(i) + 0.25f;
  UsmBuffer device = UsmBuffer::device(owner, count * sizeof(float));
  {
    Queue borrowed = Queue::borrow(DeviceBackend::hip, 0, owner.native_stream());
    EXPECT_FALSE(borrowed.owns_stream());
    EXPECT_EQ(borrowed.native_stream(), owner.native_stream());
    owner.memcpy(device.get(), source.data(), count * sizeof(float));
    borrowed.memcpy(back.data(), device.get(), count * sizeof(float));
    borrowed.wait();
  }
  EXPECT_EQ(back, source);
  owner.memset(device.get(), 0, count * sizeof(float));  // the stream outlived the borrowed queue
  EXPECT_NO_THROW(owner.wait());
}

TEST(HipRuntime, QueueCopiesAndTimes) {
  MLA_REQUIRE_HIP_DEVICE();
  Queue queue(DeviceBackend::hip, 0);
  EXPECT_EQ(queue.backend(), DeviceBackend::hip);
  EXPECT_EQ(queue.capability().vendor, Vendor::amd);
  EXPECT_TRUE(queue.can_access(MemoryKind::device));
  EXPECT_FALSE(queue.can_access(MemoryKind::host));

  constexpr std::size_t count = 1000003;  // odd: no vector-width tail is hidden
  std::vector<float> source(count), back(count, std::nanf(""));
  for (std::size_t i = 0; i < count; ++i) source[i] = static_cast<float>(i) * 0.5f + 1.0f;
  UsmBuffer device = UsmBuffer::device(queue, count * sizeof(float));
  UsmBuffer pinned = UsmBuffer::host(queue, count * sizeof(float));
  UsmBuffer shared = UsmBuffer::shared(queue, count * sizeof(float));

  const Event start = queue.record();
  queue.memcpy(device.get(), source.data(), count * sizeof(float));
  queue.memcpy(shared.get(), device.get(), count * sizeof(float));
  queue.memcpy(pinned.get(), shared.get(), count * sizeof(float));
  queue.memcpy(back.data(), pinned.get(), count * sizeof(float));
  const Event end = queue.record();
  queue.wait();
  EXPECT_EQ(back, source);
  EXPECT_GE(Event::elapsed_ms(start, end), 0.0);

  queue.memset(device.get(), 0, count * sizeof(float));
  queue.memset(pinned.get(), 0xff, sizeof(float));  // host memory: ordered after the device work
  queue.memcpy(back.data(), device.get(), count * sizeof(float));
  queue.wait();
  for (std::size_t i = 0; i < count; i += 4099) EXPECT_EQ(back[i], 0.0f) << i;
  EXPECT_TRUE(std::isnan(pinned.as<float>()[0]));
}

TEST(HipRuntime, BadDeviceIndexIsAnError) {
  MLA_REQUIRE_HIP_DEVICE();
  const int count = static_cast<int>(detect_devices().size());
  EXPECT_THROW((void)Queue(DeviceBackend::hip, count), Error);
  EXPECT_THROW((void)Queue(DeviceBackend::hip, -1), Error);
}

}  // namespace
}  // namespace mla
