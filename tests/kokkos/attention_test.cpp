// KOKKOS on shapes the conformance sweep keeps small: several query and key
// tiles per sequence, many work items, bottom-right alignment across tiles.
#include <gtest/gtest.h>

#include "kokkos/kokkos_helpers.hpp"
#include "mla/detail/queue_impl.hpp"

namespace mla::testing {
namespace {

TEST(KokkosAttention, LongCausalSequenceDeepSeekDims) {
  // 1000 queries: not a multiple of any tile; 16 heads as at TP8.
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params(deepseek_dims, 16, DType::float32), {1000}, {1000}, 1));
}

TEST(KokkosAttention, VarlenAcrossTileBoundariesBf16) {
  const std::vector<int> lens{97, 0, 200, 1, 513, 64, 65};
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params(deepseek_dims, 4, DType::bfloat16), lens, lens, 2));
}

TEST(KokkosAttention, MoreKeysThanQueriesIsBottomRightAligned) {
  // 300 queries see 700 keys: the diagonal crosses query tiles at an offset.
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({64, 64, 128}, 3, DType::float16), {300, 5}, {700, 130}, 3));
}

TEST(KokkosAttention, WideValueHeadGlm5Dims) {
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({192, 64, 256}, 2, DType::float32), {257}, {257}, 4));
}

TEST(KokkosAttention, OddHeadDims) {
  // dqk 37 and dv 45: nothing rounds to a vector width or a register block.
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({30, 7, 45}, 5, DType::float32), {130, 3}, {130, 3}, 5));
}

// Reports itself as a CUDA queue; KOKKOS must refuse it before touching memory.
class FakeCudaQueue final : public detail::QueueImpl {
 public:
  FakeCudaQueue() { capability_.vendor = Vendor::nvidia; }
  DeviceBackend backend() const override { return DeviceBackend::cuda; }
  int device_index() const override { return 0; }
  const DeviceCapability& capability() const override { return capability_; }
  void* native_stream() const override { return nullptr; }
  bool can_access(MemoryKind) const override { return true; }
  void* allocate(std::size_t, MemoryKind) override { return nullptr; }
  void deallocate(void*, MemoryKind) noexcept override {}
  void memcpy(void*, const void*, std::size_t) override {}
  void memset(void*, int, std::size_t) override {}
  std::shared_ptr<detail::EventImpl> record() override { return nullptr; }
  void wait() override {}

 private:
  DeviceCapability capability_;
};

TEST(KokkosBackend, GpuQueueIsNotSupported) {
  Queue gpu(std::make_shared<FakeCudaQueue>());
  auto backend = detail::kokkos_backend_entry().factory(kokkos_params(deepseek_dims, 1, DType::float32));
  try {
    backend->prepare(gpu, PrefillMetadata::from_lengths({4}, {4}));
    FAIL() << "prepare accepted a CUDA queue";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::not_supported);
    EXPECT_NE(std::string(e.what()).find("host queue"), std::string::npos) << e.what();
  }
}

TEST(KokkosBackend, EntryDescribesItself) {
  const BackendEntry entry = detail::kokkos_backend_entry();
  EXPECT_EQ(entry.description.name, "KOKKOS");
  EXPECT_EQ(entry.description.dtypes,
            (std::vector<DType>{DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3}));
  EXPECT_TRUE(entry.description.dims.empty());
  EXPECT_TRUE(entry.description.fp8_output);
  ASSERT_TRUE(entry.description.availability);
  EXPECT_TRUE(entry.description.availability().available);  // this test is only built with Kokkos
  auto backend = entry.factory(kokkos_params({64, 64, 128}, 2, DType::bfloat16));
  EXPECT_EQ(backend->name(), "KOKKOS");
  EXPECT_TRUE(backend->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor));
}

}  // namespace
}  // namespace mla::testing
