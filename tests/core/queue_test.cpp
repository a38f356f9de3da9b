#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "mla/error.hpp"
#include "mla/platform.hpp"
#include "mla/queue.hpp"

namespace {

TEST(HostQueue, AllocatesCopiesAndSetsEveryKind) {
  mla::Queue q = mla::Queue::host();
  EXPECT_EQ(q.backend(), mla::DeviceBackend::host);
  EXPECT_EQ(q.native_stream(), nullptr);
  std::vector<float> src(1000);
  std::iota(src.begin(), src.end(), 1.0f);
  const std::size_t bytes = src.size() * sizeof(float);
  mla::UsmBuffer device = mla::UsmBuffer::device(q, bytes);
  mla::UsmBuffer host = mla::UsmBuffer::host(q, bytes);
  mla::UsmBuffer shared = mla::UsmBuffer::shared(q, bytes);
  ASSERT_TRUE(device && host && shared);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(device.get()) % 64, 0u);
  q.memcpy(device.get(), src.data(), bytes);
  q.memcpy(shared.get(), device.get(), bytes);
  q.memcpy(host.get(), shared.get(), bytes);
  q.wait();
  for (std::size_t i = 0; i < src.size(); ++i) ASSERT_EQ(host.as<float>()[i], src[i]);
  q.memset(host.get(), 0, bytes);
  q.wait();
  EXPECT_EQ(host.as<float>()[999], 0.0f);
}

TEST(HostQueue, BufferMoveTransfersOwnership) {
  mla::Queue q = mla::Queue::host();
  mla::UsmBuffer a = mla::UsmBuffer::device(q, 128);
  void* p = a.get();
  mla::UsmBuffer b = std::move(a);
  EXPECT_EQ(b.get(), p);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(mla::UsmBuffer::device(q, 0).get(), nullptr);
}

TEST(HostQueue, EventsMeasureElapsedTime) {
  mla::Queue q = mla::Queue::host();
  mla::Event start = q.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  mla::Event end = q.record();
  q.wait();
  const double ms = mla::Event::elapsed_ms(start, end);
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 5000.0);
  EXPECT_THROW(mla::Event::elapsed_ms(mla::Event{}, end), mla::Error);
}

TEST(HostQueue, NullPointersAreErrors) {
  mla::Queue q = mla::Queue::host();
  float x = 0;
  EXPECT_THROW(q.memcpy(nullptr, &x, 4), mla::Error);
  EXPECT_THROW(q.memset(nullptr, 0, 4), mla::Error);
  EXPECT_NO_THROW(q.memcpy(nullptr, nullptr, 0));
}

TEST(Queue, UnbuiltVendorIsAClearError) {
  for (mla::DeviceBackend backend : {mla::DeviceBackend::cuda, mla::DeviceBackend::hip}) {
    if (mla::device_backend_built(backend)) continue;
    try {
      mla::Queue q(backend, 0);
      FAIL() << "created a queue for an unbuilt backend";
    } catch (const mla::Error& e) {
      EXPECT_EQ(e.category(), mla::ErrorCategory::not_supported);
      EXPECT_NE(std::string(e.what()).find("configured without"), std::string::npos) << e.what();
    }
  }
}

TEST(Queue, BorrowingNeedsAGpuStreamTheBuildHas) {
  try {
    (void)mla::Queue::borrow(mla::DeviceBackend::host, 0, nullptr);
    FAIL() << "borrowed a host stream";
  } catch (const mla::Error& e) {
    EXPECT_EQ(e.category(), mla::ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("the host queue has no stream to borrow"), std::string::npos) << e.what();
  }
  for (mla::DeviceBackend backend : {mla::DeviceBackend::cuda, mla::DeviceBackend::hip}) {
    if (mla::device_backend_built(backend)) continue;
    try {
      (void)mla::Queue::borrow(backend, 0, nullptr);
      FAIL() << "borrowed a stream of an unbuilt backend";
    } catch (const mla::Error& e) {
      EXPECT_EQ(e.category(), mla::ErrorCategory::not_supported);
      EXPECT_NE(std::string(e.what()).find("configured without"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(mla::Queue::host().owns_stream());
}

TEST(Queue, WaitForAnEventOrdersWithoutError) {
  mla::Queue a = mla::Queue::host(), b = mla::Queue::host();
  EXPECT_NO_THROW(b.wait_for(a.record()));
  EXPECT_THROW(b.wait_for(mla::Event{}), mla::Error);
}

TEST(Queue, DefaultQueueIsHostWithoutDevices) {
  if (!mla::detect_devices().empty()) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(mla::Queue::default_queue().backend(), mla::DeviceBackend::host);
}

TEST(OwnedTensor, ViewCoversItsBuffer) {
  mla::Queue q = mla::Queue::host();
  mla::OwnedTensor t = mla::OwnedTensor::device(q, mla::DType::bfloat16, {3, 4, 5});
  EXPECT_EQ(t.buffer.bytes(), 3u * 4 * 5 * 2);
  EXPECT_EQ(t.view.data, t.buffer.get());
  EXPECT_EQ(t.view.memory, mla::MemoryKind::device);
}

}  // namespace

namespace {

// Records every call and hands out memory from the queue it wraps.
class RecordingAllocator final : public mla::Allocator {
 public:
  explicit RecordingAllocator(std::shared_ptr<mla::Allocator> inner, bool fail = false)
      : inner_(std::move(inner)), fail_(fail) {}
  void* allocate(std::size_t bytes, mla::MemoryKind kind) override {
    ++allocations;
    last_bytes = bytes;
    return fail_ ? nullptr : inner_->allocate(bytes, kind);
  }
  void deallocate(void* ptr, mla::MemoryKind kind) noexcept override {
    ++frees;
    inner_->deallocate(ptr, kind);
  }
  int allocations = 0;
  int frees = 0;
  std::size_t last_bytes = 0;

 private:
  std::shared_ptr<mla::Allocator> inner_;
  bool fail_;
};

TEST(QueueAllocator, AllocationsGoThroughTheCallersAllocator) {
  mla::Queue plain = mla::Queue::host();
  auto recording = std::make_shared<RecordingAllocator>(plain.allocator());
  mla::Queue q = plain.with_allocator(recording);
  EXPECT_EQ(q.backend(), plain.backend());
  EXPECT_EQ(q.native_stream(), plain.native_stream());
  EXPECT_EQ(q.allocator(), recording);
  {
    mla::UsmBuffer a = mla::UsmBuffer::device(q, 100);
    mla::UsmBuffer b = mla::UsmBuffer::host(q, 0);  // nothing to allocate
    mla::UsmBuffer c = mla::UsmBuffer::device(plain, 8);
    EXPECT_EQ(recording->allocations, 1);
    EXPECT_EQ(recording->last_bytes, 100u);
    const std::vector<int> src{1, 2, 3};
    q.memcpy(a.get(), src.data(), sizeof(int) * 3);
    q.wait();
    EXPECT_EQ(a.as<int>()[2], 3);
  }
  EXPECT_EQ(recording->frees, 1);
  // A second allocator replaces the first instead of stacking on it.
  auto other = std::make_shared<RecordingAllocator>(plain.allocator());
  mla::Queue r = q.with_allocator(other);
  mla::UsmBuffer d = mla::UsmBuffer::device(r, 4);
  EXPECT_EQ(other->allocations, 1);
  EXPECT_EQ(recording->allocations, 1);
}

TEST(QueueAllocator, FailuresAreErrors) {
  mla::Queue plain = mla::Queue::host();
  try {
    (void)plain.with_allocator(nullptr);
    FAIL() << "a null allocator was accepted";
  } catch (const mla::Error& e) {
    EXPECT_EQ(e.category(), mla::ErrorCategory::invalid_argument);
  }
  mla::Queue q = plain.with_allocator(std::make_shared<RecordingAllocator>(plain.allocator(), /*fail=*/true));
  try {
    mla::UsmBuffer a = mla::UsmBuffer::device(q, 64);
    FAIL() << "a failed allocation returned a buffer";
  } catch (const mla::Error& e) {
    EXPECT_EQ(e.category(), mla::ErrorCategory::device);
    EXPECT_NE(std::string(e.what()).find("the queue's allocator returned no memory for 64 bytes of device memory"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
