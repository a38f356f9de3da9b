// Caller-provided memory: a whole prefill step (new tokens, context chunks,
// merges) into the caller's output, LSE and workspace equals the allocating
// path bit for bit, and once warm it makes no allocation on the queue. An
// allocator that counts (Queue::with_allocator) is the witness.
#include <atomic>
#include <cstring>
#include <memory>

#include "conformance/conformance_fixture.hpp"
#include "error_message.hpp"

namespace mla::testing {
namespace {

// Fails the allocation numbered `fail_at` (1-based), as a full device would.
class FailingAllocator final : public Allocator {
 public:
  FailingAllocator(std::shared_ptr<Allocator> inner, int fail_at) : inner_(std::move(inner)), fail_at_(fail_at) {}
  void* allocate(std::size_t bytes, MemoryKind kind) override {
    if (++count_ == fail_at_) return nullptr;
    ++live_;
    return inner_->allocate(bytes, kind);
  }
  void deallocate(void* ptr, MemoryKind kind) noexcept override {
    --live_;
    inner_->deallocate(ptr, kind);
  }
  int count() const { return count_; }
  int live() const { return live_; }

 private:
  std::shared_ptr<Allocator> inner_;
  int fail_at_;
  int count_ = 0;
  int live_ = 0;
};

const std::vector<int> q_lens{1, 0, 17, 6, 33};
const std::vector<std::vector<int>> chunk_lens{{5, 0, 40, 0, 17}, {0, 3, 11, 1, 0}, {2, 0, 0, 9, 0}};

::testing::AssertionResult same_bytes(const HostTensor& a, const HostTensor& b, const char* what) {
  if (a.storage_bytes() != b.storage_bytes())
    return ::testing::AssertionFailure() << what << ": " << a.storage_bytes() << " vs " << b.storage_bytes()
                                         << " bytes";
  if (std::memcmp(a.storage(), b.storage(), a.storage_bytes()) != 0)
    return ::testing::AssertionFailure() << what << " differs from the path it is compared with";
  return ::testing::AssertionSuccess();
}

// One step's metadata and random operands: new tokens `lens`, then one
// context chunk per entry of `chunks`, with views ready for run_prefill_step.
struct Step {
  PrefillMetadata meta;
  std::vector<Operands> chunks;
  std::vector<TensorView> chunk_k, chunk_v;
  Operands ops;
};

class CallerMemory : public Conformance {
 protected:
  Step random_step(const std::vector<int>& lens, const std::vector<std::vector<int>>& chunks) {
    Step step;
    step.meta = PrefillMetadata::from_lengths(lens, lens);
    for (const std::vector<int>& chunk : chunks) {
      step.meta.add_chunk(chunk);
      std::int64_t keys = 0;
      for (int n : chunk) keys += n;
      step.chunks.push_back(random_operands(0, keys));
    }
    for (const Operands& chunk : step.chunks) {
      step.chunk_k.push_back(chunk.dk.view);
      step.chunk_v.push_back(chunk.dv.view);
    }
    step.ops = random_operands(step.meta.num_q_tokens(), step.meta.num_k_tokens());
    return step;
  }
};

// 0 to 3 chunks: both parities of the merge ping-pong, and the step without context.
TEST_P(CallerMemory, PrefillStepIntoCallerBuffersEqualsAllocatingPathAndAllocatesNothing) {
  for (std::size_t num_chunks = 0; num_chunks <= chunk_lens.size(); ++num_chunks) {
    SCOPED_TRACE(std::to_string(num_chunks) + " chunk(s)");
    const Step step_data =
        random_step(q_lens, std::vector<std::vector<int>>(chunk_lens.begin(), chunk_lens.begin() + num_chunks));
    const PrefillMetadata& meta = step_data.meta;
    const std::vector<TensorView>&chunk_k = step_data.chunk_k, &chunk_v = step_data.chunk_v;
    const Operands& ops = step_data.ops;
    const std::int64_t nq = meta.num_q_tokens();

    auto counter = std::make_shared<CountingAllocator>(queue_.allocator());
    Queue counted = queue_.with_allocator(counter);
    // The allocating path, on the counting queue: the counter sees its allocations.
    const AttentionResult allocated =
        run_prefill_step(*backend_, counted, meta, ops.dq.view, ops.dk.view, ops.dv.view, chunk_k, chunk_v, scale_);
    counted.wait();
    ASSERT_GT(counter->allocations(), 0);
    const HostTensor expected_out = fetch(allocated.out);
    const HostTensor expected_lse = fetch(allocated.lse);

    // The caller's buffers come from the plain queue, poisoned (all bits set: NaN in every float dtype).
    OwnedTensor out = OwnedTensor::device(queue_, dtype(), {nq, heads(), v_dim()});
    OwnedTensor lse = OwnedTensor::device(queue_, DType::float32, {heads(), nq});
    UsmBuffer workspace = UsmBuffer::device(queue_, prefill_step_workspace_size(params_, meta));
    const PrefillStepBuffers buffers{out.view, lse.view, workspace.get(), workspace.bytes()};
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      queue_.memset(out.buffer.get(), 0xff, out.buffer.bytes());
      queue_.memset(lse.buffer.get(), 0xff, lse.buffer.bytes());
      const int before = counter->allocations();
      run_prefill_step(*backend_, counted, meta, ops.dq.view, ops.dk.view, ops.dv.view, chunk_k, chunk_v, scale_,
                       buffers);
      counted.wait();
      // Step 0 may size the backend's metadata buffer; after that, nothing.
      if (step > 0) {
        EXPECT_EQ(counter->allocations(), before) << "allocations in the steady state";
      }
      EXPECT_TRUE(same_bytes(fetch(out.view), expected_out, "out"));
      EXPECT_TRUE(same_bytes(fetch(lse.view), expected_lse, "lse"));
    }
  }
}

// Metadata the engine keeps on the device: the same step through
// prepare_device() equals the host-metadata step bit for bit, with the
// caller's buffers and no allocation, also when max_seqlen_q and
// max_seqlen_k are loose upper bounds (the GPU grids then hold empty tiles).
// Split-KV is off: its split count follows the launch's size, which device
// metadata's loose bounds change (docs/contract.md §6).
TEST_P(CallerMemory, DeviceMetadataStepEqualsHostMetadataStep) {
  const NoKvSplits no_splits;
  // One sequence longer than any kernel's query tile (64 or 128 rows), so
  // that a sequence spans several tiles of the grid.
  const std::vector<int> long_q_lens{1, 0, 130, 6, 33};
  const Step step_data = random_step(long_q_lens, chunk_lens);
  const PrefillMetadata& meta = step_data.meta;
  const std::vector<TensorView>&chunk_k = step_data.chunk_k, &chunk_v = step_data.chunk_v;
  const Operands& ops = step_data.ops;
  const std::int64_t nq = meta.num_q_tokens();
  const AttentionResult expected_result =
      run_prefill_step(*backend_, queue_, meta, ops.dq.view, ops.dk.view, ops.dv.view, chunk_k, chunk_v, scale_);
  queue_.wait();
  const HostTensor expected_out = fetch(expected_result.out);
  const HostTensor expected_lse = fetch(expected_result.lse);

  // The arrays, uploaded once as an engine holds them.
  const auto upload_array = [&](const std::vector<std::int32_t>& values) {
    UsmBuffer buffer = UsmBuffer::device(queue_, values.size() * sizeof(std::int32_t));
    queue_.memcpy(buffer.get(), values.data(), buffer.bytes());
    return buffer;
  };
  UsmBuffer cu_q = upload_array(meta.cu_seqlens_q), cu_k = upload_array(meta.cu_seqlens_k);
  std::vector<UsmBuffer> cu_chunks;
  DevicePrefillMetadata device;
  device.batch_size = meta.batch_size();
  device.cu_seqlens_q = cu_q.as<const std::int32_t>();
  device.cu_seqlens_k = cu_k.as<const std::int32_t>();
  device.num_q_tokens = nq;
  device.num_k_tokens = meta.num_k_tokens();
  device.max_seqlen_q = meta.max_seqlen_q + 37;  // loose bounds: whole empty tiles
  device.max_seqlen_k = meta.max_seqlen_k + 5;
  device.causal = meta.causal;
  for (const PrefillMetadata::Chunk& chunk : meta.chunks) {
    cu_chunks.push_back(upload_array(chunk.cu_seqlens_k));
    device.chunks.push_back({cu_chunks.back().as<const std::int32_t>(), chunk.cu_seqlens_k.back(), chunk.max_seqlen_k});
  }

  auto counter = std::make_shared<CountingAllocator>(queue_.allocator());
  Queue counted = queue_.with_allocator(counter);
  OwnedTensor out = OwnedTensor::device(queue_, dtype(), {nq, heads(), v_dim()});
  OwnedTensor lse = OwnedTensor::device(queue_, DType::float32, {heads(), nq});
  UsmBuffer workspace = UsmBuffer::device(queue_, prefill_step_workspace_size(params_, device));
  ASSERT_EQ(workspace.bytes(), prefill_step_workspace_size(params_, meta));
  const PrefillStepBuffers buffers{out.view, lse.view, workspace.get(), workspace.bytes()};
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    queue_.memset(out.buffer.get(), 0xff, out.buffer.bytes());
    queue_.memset(lse.buffer.get(), 0xff, lse.buffer.bytes());
    run_prefill_step(*backend_, counted, device, ops.dq.view, ops.dk.view, ops.dv.view, chunk_k, chunk_v, scale_,
                     buffers);
    counted.wait();
    EXPECT_EQ(counter->allocations(), 0);
    EXPECT_TRUE(same_bytes(fetch(out.view), expected_out, "out"));
    EXPECT_TRUE(same_bytes(fetch(lse.view), expected_lse, "lse"));
  }

  // Every backend refuses a max_seqlen that cannot bound the tokens (B
  // sequences of at most max_seqlen hold fewer), before reading the arrays.
  for (const bool keys : {false, true}) {
    DevicePrefillMetadata short_max = device;
    (keys ? short_max.max_seqlen_k : short_max.max_seqlen_q) = 0;
    try {
      backend_->prepare_device(queue_, short_max);
      ADD_FAILURE() << "max_seqlen 0 was accepted for " << (keys ? "keys" : "queries");
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(
          std::string(error.what()).find(keys ? "max_seqlen_k = 0 cannot bound" : "max_seqlen_q = 0 cannot bound"),
          std::string::npos)
          << error.what();
    }
  }

  // Sizes that disagree with the arrays are caught where the arrays are read
  // on the host; the flash kernels trust them, as the header says.
  if (backend_->name().find("FLASH") == std::string::npos) {
    DevicePrefillMetadata wrong = device;
    wrong.num_q_tokens = nq - 1;
    try {
      backend_->prepare_device(queue_, wrong);
      ADD_FAILURE() << "a wrong num_q_tokens was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("device metadata: cu_seqlens_q ends at"), std::string::npos)
          << error.what();
    }
  }
}

// Failure injection: whichever allocation of an allocating step fails, the
// step raises one Error(device), frees what it had allocated, and the next
// step on the same backend gives the right result.
TEST_P(CallerMemory, AnAllocationFailureIsOneErrorAndTheNextStepWorks) {
  const Step s = random_step(q_lens, {chunk_lens[0], chunk_lens[1]});
  const auto run = [&](Queue& queue) {
    return run_prefill_step(*backend_, queue, s.meta, s.ops.dq.view, s.ops.dk.view, s.ops.dv.view, s.chunk_k, s.chunk_v,
                            scale_);
  };
  const AttentionResult expected = run(queue_);
  queue_.wait();
  const HostTensor expected_out = fetch(expected.out);
  // Fail the first allocation, then the second, ... until a step needs no more.
  int failures = 0;
  for (int fail_at = 1; fail_at <= 64; ++fail_at) {
    SCOPED_TRACE("allocation " + std::to_string(fail_at) + " fails");
    auto failing = std::make_shared<FailingAllocator>(queue_.allocator(), fail_at);
    Queue queue = queue_.with_allocator(failing);
    bool failed = false;
    try {
      (void)run(queue);
    } catch (const Error& error) {
      failed = true;
      EXPECT_EQ(error.category(), ErrorCategory::device) << error.what();
      EXPECT_NE(std::string(error.what()).find("the queue's allocator returned no memory"), std::string::npos)
          << error.what();
    }
    queue.wait();
    EXPECT_EQ(failing->live(), 0) << "memory allocated before the failure was not freed";
    if (!failed) break;
    ++failures;
  }
  EXPECT_GE(failures, 3) << "the step's output, LSE and workspace each come from the allocator";
  const AttentionResult again = run(queue_);
  queue_.wait();
  EXPECT_TRUE(same_bytes(fetch(again.out), expected_out, "out after the failures"));
}

// Outputs that share memory with an input are refused by the backend under
// test before it runs, naming both (the shared checks every backend calls).
TEST_P(CallerMemory, OutputsOverlappingInputsAreRefused) {
  const Step step = random_step({3, 4}, {{2, 5}});
  const Operands& ops = step.ops;
  const std::int64_t nq = step.meta.num_q_tokens();
  backend_->prepare(queue_, step.meta);
  const auto message = [](auto&& call) { return invalid_argument_message(call); };
  // k and v have as many tokens as q here, so v has out's shape.
  EXPECT_NE(message([&] {
              backend_->run_new_tokens(queue_, ops.dq.view, ops.dk.view, ops.dv.view, scale_, true, ops.dv.view);
            }).find("out overlaps v"),
            std::string::npos);
  OwnedTensor out = OwnedTensor::device(queue_, dtype(), {nq, heads(), v_dim()});
  const TensorView lse_in_q =
      TensorView::contiguous(ops.dq.view.data, DType::float32, {heads(), nq}, MemoryKind::device);
  EXPECT_NE(message([&] {
              backend_->run_context_chunk(queue_, 0, ops.dq.view, step.chunk_k[0], step.chunk_v[0], scale_, out.view,
                                          lse_in_q);
            }).find("chunk lse overlaps q"),
            std::string::npos);
  OwnedTensor lse = OwnedTensor::device(queue_, DType::float32, {heads(), nq});
  const MergeArgs merge{out.view,    lse.view,     ops.dv.view,  lse_in_q,
                        ops.dv.view, TensorView{}, std::nullopt, std::nullopt};
  EXPECT_NE(message([&] { backend_->merge_attn_states(queue_, merge); }).find("merge: out overlaps suffix_out"),
            std::string::npos);
  UsmBuffer workspace = UsmBuffer::device(queue_, prefill_step_workspace_size(params_, step.meta));
  const PrefillStepBuffers buffers{ops.dv.view, lse.view, workspace.get(), workspace.bytes()};
  EXPECT_NE(message([&] {
              run_prefill_step(*backend_, queue_, step.meta, ops.dq.view, ops.dk.view, ops.dv.view, step.chunk_k,
                               step.chunk_v, scale_, buffers);
            }).find("run_prefill_step: out overlaps v"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CallerMemory,
                         ::testing::Values(ConformanceShape{DType::bfloat16, deepseek_dims, 4},
                                           ConformanceShape{DType::float16, {64, 64, 128}, 1},
                                           ConformanceShape{DType::float32, deepseek_dims, 2}),
                         shape_name);

}  // namespace
}  // namespace mla::testing
