// Builds against the installed package only: one prefill of one token through
// REFERENCE, whose output must equal v (a single visible key), then the same
// through KOKKOS when the package was built with it (which, for a static
// libmla, checks that its Kokkos dependency reaches the consumer's link).
#include <mla/backend/registry.hpp>
#include <mla/mla.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

bool prefill_one_token(mla::MlaPrefillBackendKind kind, const char* name) {
  mla::Queue queue = mla::Queue::host();
  mla::BackendParams params;
  params.num_heads = 1;
  params.dims = mla::MlaDims{4, 4, 4};
  params.dtype = mla::DType::float32;
  auto backend = mla::mla_prefill_registry().resolve(kind).factory(params);
  backend->prepare(queue, mla::PrefillMetadata::from_lengths({1}, {1}));
  std::vector<float> q(8, 0.5f), k(8, 0.25f), v{1, 2, 3, 4};
  auto view = [](std::vector<float>& data, std::int64_t width) {
    return mla::TensorView::contiguous(data.data(), mla::DType::float32, {1, 1, width});
  };
  mla::AttentionResult result = backend->run_new_tokens(queue, view(q, 8), view(k, 8), view(v, 4), 0.125f, true);
  queue.wait();
  const float* out = static_cast<const float*>(result.out.data);
  const float* lse = static_cast<const float*>(result.lse.data);
  const float expected_lse = 0.125f * 8 * 0.5f * 0.25f;  // one key: lse is its scaled score
  for (int i = 0; i < 4; ++i) {
    if (std::fabs(out[i] - v[static_cast<std::size_t>(i)]) > 1e-6f) {
      std::printf("consumer: %s: wrong output %d: %f\n", name, i, static_cast<double>(out[i]));
      return false;
    }
  }
  if (std::fabs(lse[0] - expected_lse) > 1e-6f) {
    std::printf("consumer: %s: wrong lse %f\n", name, static_cast<double>(lse[0]));
    return false;
  }
  std::printf("consumer: %s ok on %s\n", name, mla::current_platform().describe().c_str());
  return true;
}

}  // namespace

int main() {
  if (!prefill_one_token(mla::MlaPrefillBackendKind::REFERENCE, "REFERENCE")) return 1;
#ifdef CONSUMER_EXPECTS_KOKKOS
  if (!prefill_one_token(mla::MlaPrefillBackendKind::KOKKOS, "KOKKOS")) return 1;
#endif
  return 0;
}
