// merge_attn_states (docs/contract.md §3) as one parallel loop over
// (token, head) pairs; each pair rescales its V-wide rows in fp32.
#include <Kokkos_Core.hpp>

#include "flash_attention.hpp"
#include "host_parallel.hpp"
#include "kokkos_views.hpp"

namespace mla::kokkos {
namespace {

template <DType kIn, DType kOut>
struct MergeKernel {
  using In = typename Element<kIn>::Storage;
  typename StridedViewType<const In, 3>::type prefix_out, suffix_out;      // [N,H,V]
  typename StridedViewType<const float, 2>::type prefix_lse, suffix_lse;   // [H,N]
  typename StridedViewType<typename Element<kOut>::Storage, 3>::type out;  // [N,H,V]
  typename StridedViewType<float, 2>::type out_lse;                        // [H,N]
  bool write_lse = false;
  std::int64_t copy_from = 0;  // tokens >= copy_from take the suffix as it is
  int heads = 1;
  int dv = 0;
  float out_multiplier = 1.0f;   // 1 / fp8 scale, 1 otherwise
  const float* sinks = nullptr;  // [H] sink logits (§12); null: none

  // LSE of an empty partial is -inf; +inf (FA2's convention) means the same.
  KOKKOS_INLINE_FUNCTION static float as_empty(float lse) { return lse == -neg_infinity() ? neg_infinity() : lse; }

  KOKKOS_FUNCTION void operator()(std::int64_t pair) const {
    const std::int64_t t = pair / heads;
    const int h = static_cast<int>(pair % heads);
    // §12: a sink joins the denominator of the merged weights, never the LSE.
    const float sink = sinks != nullptr ? sinks[h] : neg_infinity();
    if (t >= copy_from) {
      float factor = out_multiplier;
      if (sink != neg_infinity()) {
        const float s = as_empty(suffix_lse(h, t));
        factor = s == neg_infinity() ? 0.0f : out_multiplier / (1.0f + kmath::exp(sink - s));
      }
      for (int c = 0; c < dv; ++c) {
        const float value = factor == 0.0f ? 0.0f : Element<kIn>::load(suffix_out(t, h, c)) * factor;
        out(t, h, c) = Element<kOut>::store(value);
      }
      if (write_lse) out_lse(h, t) = suffix_lse(h, t);
      return;
    }
    const float p = as_empty(prefix_lse(h, t));
    const float s = as_empty(suffix_lse(h, t));
    const float m = p > s ? p : s;
    if (m == neg_infinity()) {
      for (int c = 0; c < dv; ++c) out(t, h, c) = Element<kOut>::store(0.0f);
      if (write_lse) out_lse(h, t) = neg_infinity();
      return;
    }
    const float prefix_weight = kmath::exp(p - m);
    const float suffix_weight = kmath::exp(s - m);
    const float total = prefix_weight + suffix_weight;
    const float divisor = sink == neg_infinity() ? total : total + kmath::exp(sink - m);
    const float prefix_scale = prefix_weight / divisor * out_multiplier;
    const float suffix_scale = suffix_weight / divisor * out_multiplier;
    // A side of weight 0 (empty, or too far below the other) is not read:
    // its rows may hold anything, NaN included, and 0 * NaN is NaN.
    const bool read_prefix = prefix_weight != 0.0f;
    const bool read_suffix = suffix_weight != 0.0f;
    for (int c = 0; c < dv; ++c) {
      float value = 0.0f;
      if (read_prefix) value += Element<kIn>::load(prefix_out(t, h, c)) * prefix_scale;
      if (read_suffix) value += Element<kIn>::load(suffix_out(t, h, c)) * suffix_scale;
      out(t, h, c) = Element<kOut>::store(value);
    }
    if (write_lse) out_lse(h, t) = m + kmath::log(total);
  }
};

template <DType kIn, DType kOut>
void launch(const MergeArgs& args, const std::vector<float>& sinks) {
  using In = typename Element<kIn>::Storage;
  MergeKernel<kIn, kOut> kernel;
  kernel.prefix_out = wrap<const In, 3>(args.prefix_out);
  kernel.suffix_out = wrap<const In, 3>(args.suffix_out);
  kernel.prefix_lse = wrap<const float, 2>(args.prefix_lse);
  kernel.suffix_lse = wrap<const float, 2>(args.suffix_lse);
  kernel.out = wrap<typename Element<kOut>::Storage, 3>(args.out);
  kernel.write_lse = !args.out_lse.empty_view();
  if (kernel.write_lse) kernel.out_lse = wrap<float, 2>(args.out_lse);
  const std::int64_t tokens = args.prefix_out.shape[0];
  kernel.copy_from = args.prefill_tokens_with_context.value_or(tokens);
  kernel.heads = static_cast<int>(args.prefix_out.shape[1]);
  kernel.dv = static_cast<int>(args.prefix_out.shape[2]);
  kernel.out_multiplier = args.out_scale ? 1.0f / args.out_scale->value : 1.0f;
  kernel.sinks = sinks.empty() ? nullptr : sinks.data();
  const std::int64_t pairs = tokens * kernel.heads;
  if (pairs == 0) return;
  for_each_item("mla_kokkos_merge_attn_states", pairs, kernel);
}

template <DType kIn>
void launch_for_input(const MergeArgs& args, const std::vector<float>& sinks) {
  if (args.out.dtype == DType::float8_e4m3) {
    launch<kIn, DType::float8_e4m3>(args, sinks);
  } else {
    launch<kIn, kIn>(args, sinks);
  }
}

}  // namespace

void merge_states(const MergeArgs& args, const std::vector<float>& sinks) {
  switch (args.prefix_out.dtype) {
    case DType::float32:
      return launch_for_input<DType::float32>(args, sinks);
    case DType::float16:
      return launch_for_input<DType::float16>(args, sinks);
    case DType::bfloat16:
      return launch_for_input<DType::bfloat16>(args, sinks);
    case DType::float8_e4m3:
      break;
  }
}

}  // namespace mla::kokkos
