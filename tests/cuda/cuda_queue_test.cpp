// mla::Queue on a CUDA device: allocations of every kind, copies in every
// direction, memset, events and the errors of failed runtime calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "gpu_test_support.hpp"
#include "mla/platform.hpp"

namespace mla {
namespace {

class CudaQueueTest : public ::testing::Test {
 protected:
  void SetUp() override { MLA_REQUIRE_CUDA_DEVICE(); }
};

std::vector<std::uint8_t> random_bytes(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(count);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return bytes;
}

TEST_F(CudaQueueTest, DescribesItsDevice) {
  Queue queue(DeviceBackend::cuda, 0);
  EXPECT_EQ(queue.backend(), DeviceBackend::cuda);
  EXPECT_EQ(queue.device_index(), 0);
  EXPECT_NE(queue.native_stream(), nullptr);
  EXPECT_EQ(queue.capability().vendor, Vendor::nvidia);
  EXPECT_EQ(queue.capability().arch, detect_devices().front().arch);
  EXPECT_TRUE(queue.can_access(MemoryKind::device));
  EXPECT_TRUE(queue.can_access(MemoryKind::shared));
  EXPECT_FALSE(queue.can_access(MemoryKind::host));
  EXPECT_NE(queue.describe().find("cuda queue on device 0"), std::string::npos) << queue.describe();
}

TEST_F(CudaQueueTest, CopiesRoundTripThroughEveryMemoryKind) {
  Queue queue(DeviceBackend::cuda, 0);
  const std::size_t bytes = 3 * 1024 * 1024 + 7;  // odd size
  const std::vector<std::uint8_t> source = random_bytes(bytes, 1);
  UsmBuffer device = UsmBuffer::device(queue, bytes);
  UsmBuffer device2 = UsmBuffer::device(queue, bytes);
  UsmBuffer pinned = UsmBuffer::host(queue, bytes);
  UsmBuffer shared = UsmBuffer::shared(queue, bytes);
  queue.memcpy(device.get(), source.data(), bytes);  // pageable -> device
  queue.memcpy(device2.get(), device.get(), bytes);  // device -> device
  queue.memcpy(shared.get(), device2.get(), bytes);  // device -> managed
  queue.memcpy(pinned.get(), shared.get(), bytes);   // managed -> pinned
  std::vector<std::uint8_t> back(bytes, 0);
  queue.memcpy(back.data(), pinned.get(), bytes);  // pinned -> pageable
  queue.wait();
  EXPECT_EQ(back, source);
  EXPECT_EQ(std::memcmp(shared.get(), source.data(), bytes), 0);
}

TEST_F(CudaQueueTest, MemsetDeviceAndHostMemoryInOrder) {
  Queue queue(DeviceBackend::cuda, 0);
  const std::size_t bytes = 4099;
  const std::vector<std::uint8_t> source = random_bytes(bytes, 2);
  UsmBuffer device = UsmBuffer::device(queue, bytes);
  queue.memcpy(device.get(), source.data(), bytes);
  queue.memset(static_cast<std::uint8_t*>(device.get()) + 100, 0xab, 1000);
  std::vector<std::uint8_t> back(bytes);
  queue.memcpy(back.data(), device.get(), bytes);
  // A host memset runs after the copy into `back` is done.
  queue.memset(back.data(), 0x11, 10);
  queue.wait();
  for (std::size_t i = 0; i < bytes; ++i) {
    const std::uint8_t expected = i < 10 ? 0x11 : (i >= 100 && i < 1100 ? 0xab : source[i]);
    ASSERT_EQ(back[i], expected) << i;
  }
}

TEST_F(CudaQueueTest, EventsMeasureTime) {
  Queue queue(DeviceBackend::cuda, 0);
  const std::size_t bytes = 64 * 1024 * 1024;
  UsmBuffer a = UsmBuffer::device(queue, bytes);
  UsmBuffer b = UsmBuffer::device(queue, bytes);
  queue.memset(a.get(), 1, bytes);
  Event start = queue.record();
  for (int i = 0; i < 4; ++i) queue.memcpy(b.get(), a.get(), bytes);
  Event end = queue.record();
  const double ms = Event::elapsed_ms(start, end);
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 60000.0);
  EXPECT_NO_THROW(end.wait());
  Event other = Queue::host().record();
  EXPECT_THROW(Event::elapsed_ms(start, other), Error);
}

// An engine's stream: the borrowed queue enqueues on it in order with the
// owner's work and leaves it alive when it goes.
TEST_F(CudaQueueTest, BorrowedStreamIsUsedNotOwned) {
  Queue owner(DeviceBackend::cuda, 0);
  const std::size_t bytes = 1 << 20;
  const std::vector<std::uint8_t> source = random_bytes(bytes, 3);
  UsmBuffer a = UsmBuffer::device(owner, bytes);
  std::vector<std::uint8_t> back(bytes, 0);
  {
    Queue borrowed = Queue::borrow(DeviceBackend::cuda, 0, owner.native_stream());
    EXPECT_FALSE(borrowed.owns_stream());
    EXPECT_TRUE(owner.owns_stream());
    EXPECT_EQ(borrowed.native_stream(), owner.native_stream());
    EXPECT_NE(borrowed.describe().find("on a borrowed stream"), std::string::npos) << borrowed.describe();
    owner.memcpy(a.get(), source.data(), bytes);   // the engine's work
    borrowed.memcpy(back.data(), a.get(), bytes);  // ordered after it on the same stream
    borrowed.wait();
  }
  EXPECT_EQ(back, source);
  // The stream outlived the borrowed queue.
  owner.memset(a.get(), 0, bytes);
  EXPECT_NO_THROW(owner.wait());
  // The legacy default stream can be borrowed too.
  Queue legacy = Queue::borrow(DeviceBackend::cuda, 0, nullptr);
  legacy.memset(a.get(), 1, bytes);
  EXPECT_NO_THROW(legacy.wait());
  EXPECT_THROW((void)Queue::borrow(DeviceBackend::cuda, static_cast<int>(detect_devices().size()), nullptr), Error);
}

// A dependency between two streams, with no host wait in between: the copy on
// `second` must see the memset enqueued on `first`.
TEST_F(CudaQueueTest, WaitForOrdersTwoStreams) {
  Queue first(DeviceBackend::cuda, 0), second(DeviceBackend::cuda, 0);
  const std::size_t bytes = 64 * 1024 * 1024;
  UsmBuffer a = UsmBuffer::device(first, bytes);
  std::vector<std::uint8_t> back(bytes, 0);
  first.memset(a.get(), 0x5a, bytes);
  second.wait_for(first.record());
  second.memcpy(back.data(), a.get(), bytes);
  second.wait();
  EXPECT_EQ(std::count(back.begin(), back.end(), std::uint8_t{0x5a}), static_cast<std::ptrdiff_t>(bytes));
}

TEST_F(CudaQueueTest, FailedAllocationIsADeviceError) {
  Queue queue(DeviceBackend::cuda, 0);
  try {
    UsmBuffer huge = UsmBuffer::device(queue, std::size_t{1} << 60);
    FAIL() << "allocated 2^60 bytes";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::device);
    const std::string message = error.what();
    EXPECT_NE(message.find("cudaMalloc failed: "), std::string::npos) << message;
    EXPECT_NE(message.find("CUDA queue on device 0"), std::string::npos) << message;
  }
  // The queue still works after the failure.
  UsmBuffer ok = UsmBuffer::device(queue, 256);
  queue.memset(ok.get(), 0, 256);
  EXPECT_NO_THROW(queue.wait());
}

}  // namespace
}  // namespace mla
