#include "conformance/conformance_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "builtin_entries.hpp"
#if defined(MLA_CONFORMANCE_EMULATED)
#include <cstdio>

#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "simt/emulated_backends.hpp"
#include "simt/emulator.hpp"
#include "simt/emulator_required.hpp"
#include "simt/hopper_flash_emulated.hpp"
#endif

#ifndef MLA_CONFORMANCE_BACKEND
#error "define MLA_CONFORMANCE_BACKEND as the member name under test (mla_add_conformance does)"
#endif

namespace mla::testing {
namespace {

bool gpu_required() {
  const char* value = std::getenv("MLA_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : "; ") + item;
  return text;
}

// FNV-1a of the test's full name: every test has its own stable seed.
std::uint64_t seed_for_current_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::uint64_t hash = 1469598103934665603ull;
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

std::int64_t total(const std::vector<int>& lens) {
  std::int64_t sum = 0;
  for (int n : lens) sum += n;
  return sum;
}

}  // namespace

HostTensor concat_context(DType dtype, const std::vector<const HostTensor*>& parts,
                          const std::vector<std::vector<int>>& part_lens, std::vector<int>& full_lens) {
  const std::size_t batch = part_lens.front().size();
  full_lens.assign(batch, 0);
  for (const auto& lens : part_lens)
    for (std::size_t b = 0; b < batch; ++b) full_lens[b] += lens[b];
  const std::int64_t heads = parts.front()->size(1), dim = parts.front()->size(2);
  HostTensor full(dtype, {total(full_lens), heads, dim});
  std::vector<std::vector<std::int64_t>> starts;
  for (const auto& lens : part_lens) starts.push_back(offsets_of(lens));
  std::int64_t row = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t p = 0; p < parts.size(); ++p) {
      for (std::int64_t t = starts[p][b]; t < starts[p][b + 1]; ++t, ++row)
        for (std::int64_t h = 0; h < heads; ++h)
          for (std::int64_t d = 0; d < dim; ++d) full.set(parts[p]->at(t, h, d), row, h, d);
    }
  }
  return full;
}

std::string shape_name(const ::testing::TestParamInfo<ConformanceShape>& info) {
  const ConformanceShape& s = info.param;
  std::ostringstream os;
  os << dtype_name(s.dtype);
  if (s.out_dtype) os << "_to_" << dtype_name(*s.out_dtype);
  os << "_" << s.dims.qk_nope_head_dim << "x" << s.dims.qk_rope_head_dim << "x" << s.dims.v_head_dim << "_h" << s.heads;
  return os.str();
}

void PrintTo(const ConformanceShape& shape, std::ostream* os) {
  *os << dtype_name(shape.dtype);
  if (shape.out_dtype) *os << " out " << dtype_name(*shape.out_dtype);
  *os << " " << to_string(shape.dims) << " heads=" << shape.heads;
}

namespace {

// The backend under test: a registry member, or (MLA_CONFORMANCE_EMULATED) a
// GPU backend whose kernels run under the GPU emulator on the host queue.
BackendEntry entry_under_test(const std::string& name) {
#if defined(MLA_CONFORMANCE_EMULATED)
  (void)name;
  return MLA_CONFORMANCE_EMULATED;
#else
  MlaPrefillRegistry& registry = mla_prefill_registry();
  return registry.resolve(registry.parse(name));
#endif
}

}  // namespace

void Conformance::SetUp() {
  const std::string name = MLA_CONFORMANCE_BACKEND;
  const BackendEntry entry = entry_under_test(name);
  description_ = entry.description;

  // The queue kind comes from the entry, as make_queue() takes it.
  const DeviceBackend device =
      description_.queue_kinds.empty() ? DeviceBackend::host : description_.queue_kinds.front();
  std::string missing;
  if (device != DeviceBackend::host && !device_backend_built(device))
    missing = "this build has no " + std::string(device_backend_name(device)) + " support";
  else if (device != DeviceBackend::host && detect_devices().empty())
    missing = "no GPU detected";
  if (missing.empty()) {
    const Availability availability = description_.availability ? description_.availability() : Availability{};
    if (!availability.available) missing = availability.reason.empty() ? "not available" : availability.reason;
  }
  if (!missing.empty()) {
    if (device != DeviceBackend::host && gpu_required()) FAIL() << name << ": " << missing << " (MLA_REQUIRE_GPU=1)";
#if defined(MLA_CONFORMANCE_EMULATED)
    if (emulator_required()) FAIL() << name << ": " << missing << " (MLA_REQUIRE_EMULATOR=1)";
#endif
    GTEST_SKIP() << name << ": " << missing;
  }

  // Plugins declare no queue kinds (make_queue would give the default queue);
  // the example plugin under test is a host backend.
  queue_ = description_.queue_kinds.empty() ? Queue::host() : make_queue(description_);
  const ConformanceShape& shape = GetParam();
  const std::vector<std::string> reasons = validate(description_, queue_.capability(), {shape.dtype, shape.dims});
  // Missing device code for the GPU at hand counts as a missing GPU, not as a shape the backend declines.
  const bool build_lacks_device = std::any_of(reasons.begin(), reasons.end(), [](const std::string& reason) {
    return reason.starts_with("required dependencies not available");
  });
  if (build_lacks_device && device != DeviceBackend::host && gpu_required())
    FAIL() << name << ": " << join(reasons) << " (MLA_REQUIRE_GPU=1)";
  if (!reasons.empty()) GTEST_SKIP() << name << " does not serve this shape: " << join(reasons);

  params_.num_heads = shape.heads;
  params_.dims = shape.dims;
  params_.dtype = shape.dtype;
  params_.out_dtype = shape.out_dtype;
  params_.kv_lora_rank = 64;  // the MLA step's latent width; DeepSeek's 512 only makes the tests slower
  scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.dims.qk_head_dim())));
  backend_ = entry.factory(params_);
  reference_ = detail::reference_backend_entry().factory(params_);
  rng_.seed(seed_for_current_test());
#if defined(MLA_CONFORMANCE_EMULATED)
  simt::reset_statistics();
#endif
}

void Conformance::TearDown() {
#if defined(MLA_CONFORMANCE_EMULATED)
  if (IsSkipped()) return;
  std::printf("[ emulator ] %s\n", simt::describe(simt::statistics()).c_str());
#endif
}

HostTensor Conformance::random_tensor(std::vector<std::int64_t> shape, float lo, float hi,
                                      std::vector<std::int64_t> strides, std::int64_t offset) {
  HostTensor tensor(dtype(), std::move(shape), std::move(strides), offset);
  tensor.fill_random(rng_, lo, hi);
  return tensor;
}

Operands Conformance::random_operands(std::int64_t nq, std::int64_t nk, bool strided) {
  const std::int64_t h = heads(), dqk = qk_dim(), dv = v_dim();
  Operands ops;
  if (strided) {
    // Padding of 16 elements keeps rows 16-byte aligned for vector loads.
    ops.q = random_tensor({nq, h, dqk}, -2.0f, 2.0f, {h * (dqk + 16), dqk + 16, 1});
    const std::int64_t fused = GetParam().dims.qk_nope_head_dim + dv;
    ops.v = random_tensor({nk, h, dv}, -1.0f, 1.0f, {h * fused, fused, 1}, GetParam().dims.qk_nope_head_dim);
  } else {
    ops.q = random_tensor({nq, h, dqk}, -2.0f, 2.0f);
    ops.v = random_tensor({nk, h, dv}, -1.0f, 1.0f);
  }
  ops.k = random_tensor({nk, h, dqk}, -2.0f, 2.0f);
  ops.dq = upload(queue_, ops.q);
  ops.dk = upload(queue_, ops.k);
  ops.dv = upload(queue_, ops.v);
  return ops;
}

::testing::AssertionResult Conformance::matches(const AttentionResult& result, const AttentionResult& reference,
                                                const Tolerance& tolerance) {
  const HostTensor out = fetch(result.out);
  const HostTensor lse = fetch(result.lse);
  return results_match(out.view(), lse.view(), reference.out, reference.lse, tolerance);
}

::testing::AssertionResult Conformance::reference_attention_exact(const AttentionResult& ref, const HostTensor& q,
                                                                  const HostTensor& k, const HostTensor& v,
                                                                  const std::vector<int>& q_lens,
                                                                  const std::vector<int>& k_lens, bool causal,
                                                                  std::optional<float> out_scale) {
  if (!reference_under_test()) return ::testing::AssertionSuccess();
  std::optional<double> scale_of_out;
  if (out_scale) scale_of_out = *out_scale;
  return agrees_with_oracle(ref.out, ref.lse, oracle_attention(q, k, v, q_lens, k_lens, causal, scale_, scale_of_out));
}

Conformance::ChunkedOperands Conformance::chunked_operands(const std::vector<int>& q_lens,
                                                           const std::vector<std::vector<int>>& chunk_lens) {
  ChunkedOperands c;
  c.meta = PrefillMetadata::from_lengths(q_lens, q_lens);
  for (const auto& lens : chunk_lens) {
    c.meta.add_chunk(lens);
    c.chunks.push_back(random_operands(0, total(lens)));
  }
  c.ops = random_operands(c.meta.num_q_tokens(), c.meta.num_k_tokens());
  std::vector<const HostTensor*> k_parts, v_parts;
  for (const Operands& chunk : c.chunks) {
    c.chunk_k.push_back(chunk.dk.view);
    c.chunk_v.push_back(chunk.dv.view);
    k_parts.push_back(&chunk.k);
    v_parts.push_back(&chunk.v);
  }
  k_parts.push_back(&c.ops.k);
  v_parts.push_back(&c.ops.v);
  std::vector<std::vector<int>> part_lens = chunk_lens;
  part_lens.push_back(q_lens);
  c.full_k = concat_context(dtype(), k_parts, part_lens, c.full_lens);
  c.full_v = concat_context(dtype(), v_parts, part_lens, c.full_lens);
  return c;
}

::testing::AssertionResult Conformance::chunked_prefill_matches(const std::vector<int>& q_lens,
                                                                const std::vector<std::vector<int>>& chunk_lens) {
  const ChunkedOperands c = chunked_operands(q_lens, chunk_lens);
  const AttentionResult result = run_prefill_step(*backend_, queue_, c.meta, c.ops.dq.view, c.ops.dk.view,
                                                  c.ops.dv.view, c.chunk_k, c.chunk_v, scale_);
  reference_->prepare(host_, PrefillMetadata::from_lengths(q_lens, c.full_lens));
  const AttentionResult ref =
      reference_->run_new_tokens(host_, c.ops.q.view(), c.full_k.view(), c.full_v.view(), scale_, true);
  const ::testing::AssertionResult exact =
      reference_attention_exact(ref, c.ops.q, c.full_k, c.full_v, q_lens, c.full_lens, true);
  if (!exact) return exact;
  return matches(result, ref);
}

}  // namespace mla::testing
