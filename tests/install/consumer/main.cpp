// Builds against the installed package only: one prefill of one token through
// the REFERENCE backend, whose output must equal v (a single visible key).
#include <mla/mla.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  mla::Queue queue = mla::Queue::host();
  mla::BackendParams params;
  params.num_heads = 1;
  params.scale = 0.125f;
  params.dims = mla::MlaDims{4, 4, 4};
  params.dtype = mla::DType::float32;
  auto backend = mla::mla_prefill_registry().resolve(mla::MlaPrefillBackendKind::REFERENCE).factory(params);
  backend->prepare(queue, mla::PrefillMetadata::from_lengths({1}, {1}));
  std::vector<float> q(8, 0.5f), k(8, 0.25f), v{1, 2, 3, 4};
  auto view = [](std::vector<float>& data, std::int64_t width) {
    return mla::TensorView::contiguous(data.data(), mla::DType::float32, {1, 1, width});
  };
  mla::AttentionResult result = backend->run_new_tokens(queue, view(q, 8), view(k, 8), view(v, 4), true);
  queue.wait();
  const float* out = static_cast<const float*>(result.out.data);
  const float* lse = static_cast<const float*>(result.lse.data);
  const float expected_lse = 0.125f * 8 * 0.5f * 0.25f;  // one key: lse is its scaled score
  for (int i = 0; i < 4; ++i) {
    if (std::fabs(out[i] - v[static_cast<std::size_t>(i)]) > 1e-6f) {
      std::printf("consumer: wrong output %d: %f\n", i, static_cast<double>(out[i]));
      return 1;
    }
  }
  if (std::fabs(lse[0] - expected_lse) > 1e-6f) {
    std::printf("consumer: wrong lse %f\n", static_cast<double>(lse[0]));
    return 1;
  }
  std::printf("consumer: REFERENCE ok on %s\n", mla::current_platform().describe().c_str());
  return 0;
}
