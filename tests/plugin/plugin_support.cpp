#include "plugin_support.hpp"

#include <stdlib.h>  // setenv, unsetenv, mkdtemp

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>

#include "conformance/test_tensors.hpp"

namespace mla::plugin_test {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

template <class Fn>
void for_each_index(const TensorView& view, Fn&& fn) {
  const std::int64_t n2 = view.rank > 2 ? view.shape[2] : 1;
  for (std::int64_t i0 = 0; i0 < view.shape[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < view.shape[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < n2; ++i2) fn(i0, i1, i2);
}

float load(const TensorView& view, std::int64_t i0, std::int64_t i1, std::int64_t i2 = 0) {
  return load_as_float(view.data, view.dtype, view.offset(i0, i1, i2));
}

}  // namespace

HostTensor::HostTensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  view.dtype = dtype;
  view.rank = static_cast<int>(shape.size());
  std::int64_t contiguous = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    view.shape[i] = shape[i];
    view.stride[i] = strides.empty() ? contiguous : strides[i];
    contiguous *= shape[i];
  }
  std::int64_t span = 1;
  for (int d = 0; d < view.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (view.shape[i] == 0) span = 0;
    if (span != 0) span += (view.shape[i] - 1) * view.stride[i];
  }
  storage.resize(static_cast<std::size_t>(span) * dtype_size(dtype) + 1);  // +1: never a null data pointer
  view.data = storage.data();
  poison();
}

void HostTensor::poison() {
  const std::size_t size = dtype_size(view.dtype);
  const std::uint32_t bits = mla::testing::poison_bits(view.dtype);
  for (std::size_t offset = 0; offset + size <= storage.size(); offset += size) {
    std::memcpy(storage.data() + offset, &bits, size);  // little-endian host
  }
}

void HostTensor::fill_random(std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> uniform(lo, hi);
  for_each_index(view, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2) {
    float value = round_to_dtype(uniform(rng), view.dtype);
    if (value == 0.0f) value = 0.125f;  // a zero hides a missing multiply
    store_from_float(view.data, view.dtype, view.offset(i0, i1, i2), value);
  });
}

float HostTensor::at(std::int64_t i0, std::int64_t i1, std::int64_t i2) const { return load(view, i0, i1, i2); }

double relative_error(const TensorView& out, const TensorView& ref) {
  double diff = 0.0, norm = 0.0;
  bool finite = true;
  for_each_index(ref, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2) {
    const double o = load(out, i0, i1, i2), r = load(ref, i0, i1, i2);
    if (!std::isfinite(o)) finite = false;
    diff += (o - r) * (o - r);
    norm += r * r;
  });
  if (!finite) return infinity;
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double lse_error(const TensorView& lse, const TensorView& ref) {
  double worst = 0.0;
  for_each_index(ref, [&](std::int64_t h, std::int64_t t, std::int64_t) {
    const double l = load(lse, h, t), r = load(ref, h, t);
    if (std::isinf(r) && r < 0) {
      if (!(std::isinf(l) && l < 0)) worst = infinity;
    } else if (!std::isfinite(l)) {
      worst = infinity;
    } else {
      worst = std::max(worst, std::abs(l - r));
    }
  });
  return worst;
}

double out_tolerance(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 1e-5;
    case DType::float16:
      return 2e-3;
    default:
      return 1e-2;
  }
}

double lse_tolerance(DType dtype) { return dtype == DType::bfloat16 ? 1e-2 : 1e-3; }

Step make_step(std::mt19937_64& rng, const BackendParams& params, PrefillMetadata metadata) {
  const std::int64_t h = params.num_heads, dqk = params.dims.qk_head_dim(), dv = params.dims.v_head_dim;
  Step step;
  step.q = HostTensor(params.dtype, {metadata.num_q_tokens(), h, dqk}, {h * (dqk + 8), dqk + 8, 1});
  step.k = HostTensor(params.dtype, {metadata.num_k_tokens(), h, dqk});
  step.v = HostTensor(params.dtype, {metadata.num_k_tokens(), h, dv});
  step.q.fill_random(rng, -2.0f, 2.0f);
  step.k.fill_random(rng, -2.0f, 2.0f);
  step.v.fill_random(rng, -1.0f, 1.0f);
  for (const PrefillMetadata::Chunk& chunk : metadata.chunks) {
    const std::int64_t tokens = chunk.cu_seqlens_k.back();
    step.chunk_k.emplace_back(params.dtype, std::vector<std::int64_t>{tokens, h, dqk});
    step.chunk_v.emplace_back(params.dtype, std::vector<std::int64_t>{tokens, h, dv});
    step.chunk_k.back().fill_random(rng, -2.0f, 2.0f);
    step.chunk_v.back().fill_random(rng, -1.0f, 1.0f);
  }
  step.metadata = std::move(metadata);
  return step;
}

void expect_matches_reference(PrefillBackend& backend, const BackendParams& params, float scale, const Step& step) {
  Queue queue = Queue::host();
  const std::unique_ptr<PrefillBackend> reference =
      builtin_mla_prefill_entry(MlaPrefillBackendKind::REFERENCE)->factory(params);
  backend.prepare(queue, step.metadata);
  reference->prepare(queue, step.metadata);
  const double out_tol = out_tolerance(params.dtype), lse_tol = lse_tolerance(params.dtype);
  const TensorView &q = step.q.view, &k = step.k.view, &v = step.v.view;
  const AttentionResult expected = reference->run_new_tokens(queue, q, k, v, scale, /*return_lse=*/true);

  // The caller's output, poisoned: every element must be written.
  HostTensor out(params.dtype, {step.metadata.num_q_tokens(), params.num_heads, params.dims.v_head_dim});
  const AttentionResult given = backend.run_new_tokens(queue, q, k, v, scale, /*return_lse=*/true, out.view);
  EXPECT_EQ(given.out.data, out.view.data) << "the caller's out must be written in place";
  EXPECT_FALSE(given.out_storage);
  EXPECT_LT(relative_error(out.view, expected.out), out_tol);
  EXPECT_LT(lse_error(given.lse, expected.lse), lse_tol);

  // Outputs allocated by the library on the queue; no LSE asked for.
  const AttentionResult allocated = backend.run_new_tokens(queue, q, k, v, scale, /*return_lse=*/false);
  EXPECT_TRUE(allocated.lse.empty_view());
  EXPECT_EQ(allocated.out.dtype, params.dtype);
  EXPECT_LT(relative_error(allocated.out, expected.out), out_tol);

  // A whole step: new tokens merged with every context chunk.
  std::vector<TensorView> chunk_k, chunk_v;
  for (const HostTensor& t : step.chunk_k) chunk_k.push_back(t.view);
  for (const HostTensor& t : step.chunk_v) chunk_v.push_back(t.view);
  const AttentionResult full = run_prefill_step(backend, queue, step.metadata, q, k, v, chunk_k, chunk_v, scale);
  const AttentionResult full_expected =
      run_prefill_step(*reference, queue, step.metadata, q, k, v, chunk_k, chunk_v, scale);
  EXPECT_LT(relative_error(full.out, full_expected.out), out_tol);
  EXPECT_LT(lse_error(full.lse, full_expected.lse), lse_tol);
}

RegistrySnapshot snapshot() {
  RegistrySnapshot s;
  MlaPrefillRegistry& registry = mla_prefill_registry();
  for (MlaPrefillBackendKind kind : MlaPrefillRegistry::members()) {
    const std::string member(MlaPrefillRegistry::name(kind));
    s.members.push_back(member + "=" + (registry.is_overridden(kind) ? registry.resolve(kind).description.name : "-"));
  }
  s.factories = named_factory_names();
  s.plugins = loaded_plugins();
  return s;
}

std::ostream& operator<<(std::ostream& os, const RegistrySnapshot& s) {
  const auto list = [&os](const char* label, const std::vector<std::string>& items) {
    os << label << ": [";
    for (std::size_t i = 0; i < items.size(); ++i) os << (i ? ", " : "") << items[i];
    os << "] ";
  };
  list("members", s.members);
  list("factories", s.factories);
  list("plugins", s.plugins);
  return os;
}

ScopedEnv::ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) previous_ = old;
  if (value) {
    setenv(name_.c_str(), value->c_str(), 1);
  } else {
    unsetenv(name_.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  if (previous_) {
    setenv(name_.c_str(), previous_->c_str(), 1);
  } else {
    unsetenv(name_.c_str());
  }
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "mla_plugin_test_XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) raise(ErrorCategory::io, "mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  const std::string file = (std::filesystem::path(path_) / name).string();
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

}  // namespace mla::plugin_test
