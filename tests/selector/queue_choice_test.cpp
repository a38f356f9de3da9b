// The library picks the queue: a selection knows which queue kind its backend
// runs on (BackendDescription::queue_kinds), make_queue() creates it, and a
// queue of another kind is refused with both kinds named. These run the real
// registry, as the README's C++ example does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mla/backend/registry.hpp"
#include "mla/error.hpp"
#include "mla/platform.hpp"
#include "mla/selector.hpp"
#include "reference/reference_helpers.hpp"
#include "registry/fake_backend.hpp"

namespace mla::test {
namespace {

template <class Fn>
std::string error_of(Fn&& fn, ErrorCategory expected) {
  try {
    fn();
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), expected) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error raised";
  return {};
}

const SelectorConfig bf16{DType::bfloat16, deepseek_dims};

// The README's example on GPU platforms the flash kernels do not serve: the
// selection falls back to a host backend, make_queue() gives the host queue,
// and a whole prefill step runs on it.
TEST(QueueChoice, FallbackToAHostBackendOnAGpuPlatformRuns) {
  RegistryReset reset;
  for (const char* platform : {"nvidia:7.5", "amd:gfx1100"}) {
    SCOPED_TRACE(platform);
    Selector selector(Config::builtin_defaults());
    const Selection chosen = selector.select({DType::bfloat16, {16, 8, 16}}, parse_platform(platform));
    ASSERT_TRUE(chosen.name == "KOKKOS" || chosen.name == "REFERENCE") << chosen.name;
    EXPECT_EQ(chosen.entry.description.queue_kinds, std::vector<DeviceBackend>{DeviceBackend::host});

    Queue queue = make_queue(chosen);
    EXPECT_EQ(queue.backend(), DeviceBackend::host);
    check_queue(chosen.entry.description, queue);

    BackendParams params{.num_heads = 2, .kv_lora_rank = 512, .dims = {16, 8, 16}, .dtype = DType::bfloat16};
    auto backend = selector.create(chosen, params);
    PrefillMetadata metadata = PrefillMetadata::from_lengths({3, 1}, {3, 1});
    metadata.add_chunk({2, 5});
    auto make = [&](std::int64_t tokens, int dim) {
      OwnedTensor t = OwnedTensor::device(queue, DType::bfloat16, {tokens, 2, dim});
      for (std::int64_t i = 0; i < t.view.numel(); ++i)
        store_from_float(t.view.data, DType::bfloat16, i, std::sin(0.37f * static_cast<float>(i)));
      return t;
    };
    OwnedTensor q = make(4, 24), k = make(4, 24), v = make(4, 16), ck = make(7, 24), cv = make(7, 16);
    AttentionResult result =
        run_prefill_step(*backend, queue, metadata, q.view, k.view, v.view, {ck.view}, {cv.view}, 0.1f);
    queue.wait();
    ASSERT_EQ(result.out.numel(), 4 * 2 * 16);
    for (std::int64_t i = 0; i < result.out.numel(); ++i)
      ASSERT_TRUE(std::isfinite(load_as_float(result.out.data, DType::bfloat16, i))) << i;
  }
}

TEST(QueueChoice, AMismatchedQueueNamesBothKinds) {
  RegistryReset reset;
  Selector selector(Config::builtin_defaults());
  const Selection chosen = selector.select(bf16, parse_platform("nvidia:7.5"));
  Queue gpu = testing::fake_gpu_queue();
  const std::string message =
      error_of([&] { check_queue(chosen.entry.description, gpu); }, ErrorCategory::not_supported);
  EXPECT_NE(message.find(chosen.name + " runs on a host queue, not on a cuda queue"), std::string::npos) << message;

  // The backend's own check says the same on every call.
  BackendParams params{.num_heads = 1, .kv_lora_rank = 512, .dims = deepseek_dims, .dtype = DType::bfloat16};
  auto backend = selector.create(chosen, params);
  const std::string call =
      error_of([&] { backend->prepare(gpu, PrefillMetadata::from_lengths({1}, {1})); }, ErrorCategory::not_supported);
  EXPECT_NE(call.find(chosen.name + " prepare needs a host queue; got a cuda queue"), std::string::npos) << call;
}

TEST(QueueChoice, AGpuKindThisBuildLacksIsNamed) {
  BackendDescription description;
  description.name = "SOME_GPU_BACKEND";
  description.queue_kinds = {DeviceBackend::hip};
  if (device_backend_built(DeviceBackend::hip)) GTEST_SKIP() << "this build has HIP queues";
  Selection selection;
  selection.name = description.name;
  selection.entry.description = description;
  selection.platform = parse_platform("amd:gfx90a");
  const std::string message = error_of([&] { make_queue(selection); }, ErrorCategory::not_supported);
  EXPECT_NE(message.find("SOME_GPU_BACKEND runs on a hip queue, and this build of mlaprefill has none"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("only simulated by MLA_PLATFORM"), std::string::npos) << message;
}

TEST(QueueChoice, NoDeclaredKindsTakesTheDefaultQueueAndAcceptsAny) {
  BackendDescription description;
  description.name = "ANY";
  EXPECT_EQ(make_queue(description).backend(), Queue::default_queue().backend());
  Queue gpu = testing::fake_gpu_queue();
  check_queue(description, gpu);
  check_queue(description, Queue::host());
}

TEST(QueueChoice, BuiltInEntriesDeclareTheirQueueKind) {
  MlaPrefillRegistry& registry = mla_prefill_registry();
  RegistryReset reset;
  const auto kinds = [&](const char* name) { return registry.resolve(registry.parse(name)).description.queue_kinds; };
  EXPECT_EQ(kinds("REFERENCE"), std::vector<DeviceBackend>{DeviceBackend::host});
  EXPECT_EQ(kinds("KOKKOS"), std::vector<DeviceBackend>{DeviceBackend::host});
  EXPECT_EQ(kinds("CUDA_FLASH"), std::vector<DeviceBackend>{DeviceBackend::cuda});
  EXPECT_EQ(kinds("HIP_FLASH"), std::vector<DeviceBackend>{DeviceBackend::hip});
}

}  // namespace
}  // namespace mla::test
