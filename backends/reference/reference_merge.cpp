// merge_attn_states exactly as docs/contract.md §3 states it, in fp64. Two choices
// beyond the contract's text keep garbage out of the result: a partial result
// whose weight is exactly zero is not read at all (a NaN in an empty row's
// output cannot leak), and every index is 64-bit.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference_backend.hpp"

namespace mla::reference {
namespace {

// An LSE of +inf (FA2's empty rows) means "no keys", like -inf.
double empty_if_infinite(float lse) {
  return std::isinf(lse) ? -std::numeric_limits<double>::infinity() : static_cast<double>(lse);
}

float load_lse(const TensorView& lse, std::int64_t head, std::int64_t token) {
  return load_as_float(lse.data, DType::float32, lse.offset(head, token));
}

}  // namespace

void merge(const MergeArgs& args, const std::vector<float>& sinks) {
  const std::int64_t tokens = args.prefix_out.size(0);
  const std::int64_t heads = args.prefix_out.size(1);
  const std::int64_t dim = args.prefix_out.size(2);
  const bool write_lse = !args.out_lse.empty_view();
  const double out_scale = args.out_scale ? static_cast<double>(args.out_scale->value) : 1.0;
  const double neg_inf = -std::numeric_limits<double>::infinity();

  for (std::int64_t t = 0; t < tokens; ++t) {
    const bool copy_suffix = args.prefill_tokens_with_context && t >= *args.prefill_tokens_with_context;
    for (std::int64_t h = 0; h < heads; ++h) {
      double prefix_weight = 0.0, suffix_weight = 1.0, out_lse = 0.0;
      // §12: the sink joins the merged denominator; out_lse stays without it.
      const double sink = sinks.empty() ? neg_inf : static_cast<double>(sinks[static_cast<std::size_t>(h)]);
      if (copy_suffix) {
        out_lse = static_cast<double>(load_lse(args.suffix_lse, h, t));
        if (!sinks.empty()) {
          const double s = empty_if_infinite(static_cast<float>(out_lse));
          suffix_weight = s == neg_inf ? 0.0 : 1.0 / (1.0 + std::exp(sink - s));
        }
      } else {
        const double p = empty_if_infinite(load_lse(args.prefix_lse, h, t));
        const double s = empty_if_infinite(load_lse(args.suffix_lse, h, t));
        const double m = std::max(p, s);
        if (m == neg_inf) {
          prefix_weight = suffix_weight = 0.0;
          out_lse = neg_inf;
        } else {
          const double pw = std::exp(p - m), sw = std::exp(s - m), z = pw + sw;
          const double denominator = z + std::exp(sink - m);
          prefix_weight = pw / denominator;
          suffix_weight = sw / denominator;
          out_lse = m + std::log(z);
        }
      }
      const std::int64_t prefix_base = args.prefix_out.offset(t, h);
      const std::int64_t suffix_base = args.suffix_out.offset(t, h);
      const std::int64_t out_base = args.out.offset(t, h);
      for (std::int64_t d = 0; d < dim; ++d) {
        double value = 0.0;
        if (prefix_weight != 0.0)
          value += prefix_weight * load_as_float(args.prefix_out.data, args.prefix_out.dtype,
                                                 prefix_base + d * args.prefix_out.stride[2]);
        if (suffix_weight != 0.0)
          value += suffix_weight * load_as_float(args.suffix_out.data, args.suffix_out.dtype,
                                                 suffix_base + d * args.suffix_out.stride[2]);
        store_from_float(args.out.data, args.out.dtype, out_base + d * args.out.stride[2],
                         static_cast<float>(value / out_scale));
      }
      if (write_lse)
        store_from_float(args.out_lse.data, DType::float32, args.out_lse.offset(h, t), static_cast<float>(out_lse));
    }
  }
}

}  // namespace mla::reference
