#include "conformance/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mla::testing {
namespace {

constexpr double negative_infinity = -std::numeric_limits<double>::infinity();
constexpr double fp8_largest = 448.0;

// Every element of a [N, H, D] tensor in fp64, contiguous, times its
// head's multiplier (none: 1): the loops below read each one many times.
struct Doubles {
  std::vector<double> values;
  std::int64_t heads = 0, dim = 0;
  Doubles(const HostTensor& tensor, const std::vector<double>& multipliers)
      : heads(tensor.size(1)), dim(tensor.size(2)) {
    values.reserve(static_cast<std::size_t>(tensor.size(0) * heads * dim));
    for (std::int64_t row = 0; row < tensor.size(0); ++row)
      for (std::int64_t head = 0; head < heads; ++head) {
        const double m = multipliers.empty() ? 1.0 : multipliers.at(static_cast<std::size_t>(head));
        for (std::int64_t d = 0; d < dim; ++d) values.push_back(double{tensor.at(row, head, d)} * m);
      }
  }
  // The D values of (row, head).
  const double* at(std::int64_t row, std::int64_t head) const {
    return values.data() + static_cast<std::size_t>((row * heads + head) * dim);
  }
};

// The value stored for `x`: x / out_scale saturated to the fp8 range, or x.
float quantised(double x, std::optional<double> out_scale) {
  if (!out_scale) return static_cast<float>(x);
  return static_cast<float>(std::clamp(x / *out_scale, -fp8_largest, fp8_largest));
}

}  // namespace

OracleResult oracle_attention(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                              const std::vector<int>& q_lens, const std::vector<int>& k_lens, bool causal, double scale,
                              std::optional<double> out_scale, const OracleDescales& descales, const OracleMask& mask) {
  const std::int64_t num_queries = q.size(0), heads = q.size(1), qk_dim = q.size(2), v_dim = v.size(2);
  OracleResult result{HostTensor(DType::float32, {num_queries, heads, v_dim}),
                      HostTensor(DType::float32, {heads, num_queries})};
  const Doubles queries_in(q, descales.q), keys_in(k, descales.k), values_in(v, descales.v);
  std::int64_t first_query = 0, first_key = 0;
  for (std::size_t seq = 0; seq < q_lens.size(); ++seq) {
    const std::int64_t queries = q_lens[seq], keys = k_lens[seq];
    for (std::int64_t head = 0; head < heads; ++head) {
      for (std::int64_t query = 0; query < queries; ++query) {
        // Counted from the end of the sequence: a query may see a key no
        // further from the end than itself.
        const std::int64_t query_from_end = queries - 1 - query;
        std::vector<std::int64_t> seen;
        const std::int64_t position = keys - queries + query;
        for (std::int64_t key = 0; key < keys; ++key) {
          const std::int64_t key_from_end = keys - 1 - key;
          if (causal && key_from_end < query_from_end) continue;
          if (mask.window > 0 && key <= position - mask.window) continue;
          if (mask.allowed && !mask.allowed(seq, query, key)) continue;
          seen.push_back(key);
        }
        std::vector<double> scores;
        const double* query_row = queries_in.at(first_query + query, head);
        for (std::int64_t key : seen) {
          const double* key_row = keys_in.at(first_key + key, head);
          double dot = 0.0;
          for (std::int64_t d = 0; d < qk_dim; ++d) dot += query_row[d] * key_row[d];
          scores.push_back(scale * dot);
        }
        const double largest = scores.empty() ? negative_infinity : *std::max_element(scores.begin(), scores.end());
        std::vector<double> weights;
        double denominator = 0.0;
        for (double score : scores) denominator += weights.emplace_back(std::exp(score - largest));
        const double sink = mask.sinks.empty() ? negative_infinity : mask.sinks.at(static_cast<std::size_t>(head));
        const double with_sink = denominator + std::exp(sink - largest);
        std::vector<double> numerators(static_cast<std::size_t>(v_dim), 0.0);
        for (std::size_t i = 0; i < seen.size(); ++i) {
          const double* value_row = values_in.at(first_key + seen[i], head);
          for (std::int64_t d = 0; d < v_dim; ++d) numerators[static_cast<std::size_t>(d)] += weights[i] * value_row[d];
        }
        for (std::int64_t d = 0; d < v_dim; ++d) {
          const double value = seen.empty() ? 0.0 : numerators[static_cast<std::size_t>(d)] / with_sink;
          result.out.set(quantised(value, out_scale), first_query + query, head, d);
        }
        const double lse = seen.empty() ? negative_infinity : largest + std::log(denominator);
        result.lse.set(static_cast<float>(lse), head, first_query + query);
      }
    }
    first_query += queries;
    first_key += keys;
  }
  return result;
}

OracleResult oracle_merge(const HostTensor& prefix_out, const HostTensor& prefix_lse, const HostTensor& suffix_out,
                          const HostTensor& suffix_lse, std::optional<std::int64_t> tokens_with_context,
                          std::optional<double> out_scale, const std::vector<double>& sinks) {
  const std::int64_t tokens = prefix_out.size(0), heads = prefix_out.size(1), v_dim = prefix_out.size(2);
  OracleResult result{HostTensor(DType::float32, {tokens, heads, v_dim}), HostTensor(DType::float32, {heads, tokens})};
  for (std::int64_t token = 0; token < tokens; ++token) {
    for (std::int64_t head = 0; head < heads; ++head) {
      const double sink = sinks.empty() ? negative_infinity : sinks.at(static_cast<std::size_t>(head));
      if (tokens_with_context && token >= *tokens_with_context) {
        // The sink's share of a copied token: e^sink against e^lse.
        const double lse = suffix_lse.at(head, token);
        const double kept = sinks.empty() ? 1.0 : std::isinf(lse) ? 0.0 : 1.0 / (1.0 + std::exp(sink - lse));
        for (std::int64_t d = 0; d < v_dim; ++d) {
          const double value = kept == 0.0 ? 0.0 : double{suffix_out.at(token, head, d)} * kept;
          result.out.set(quantised(value, out_scale), token, head, d);
        }
        result.lse.set(suffix_lse.at(head, token), head, token);
        continue;
      }
      double prefix = prefix_lse.at(head, token), suffix = suffix_lse.at(head, token);
      if (std::isinf(prefix)) prefix = negative_infinity;
      if (std::isinf(suffix)) suffix = negative_infinity;
      if (prefix == negative_infinity && suffix == negative_infinity) {
        for (std::int64_t d = 0; d < v_dim; ++d) result.out.set(0.0f, token, head, d);
        result.lse.set(static_cast<float>(negative_infinity), head, token);
        continue;
      }
      // Weights relative to the larger LSE; an empty side's output is never read.
      const double larger = std::max(prefix, suffix);
      const double prefix_weight = std::exp(prefix - larger), suffix_weight = std::exp(suffix - larger);
      const double total = prefix_weight + suffix_weight;
      const double divisor = total + std::exp(sink - larger);
      for (std::int64_t d = 0; d < v_dim; ++d) {
        double value = 0.0;
        if (prefix_weight > 0.0) value += double{prefix_out.at(token, head, d)} * prefix_weight / divisor;
        if (suffix_weight > 0.0) value += double{suffix_out.at(token, head, d)} * suffix_weight / divisor;
        result.out.set(quantised(value, out_scale), token, head, d);
      }
      result.lse.set(static_cast<float>(larger + std::log(total)), head, token);
    }
  }
  return result;
}

Tolerance oracle_tolerance(DType out_dtype) {
  // About half a unit in the last place, relative (2^-11 fp16, 2^-8 bf16,
  // 2^-4 for e4m3's three mantissa bits): norms of many elements sit below
  // it. float32 gets 1e-6 (about 16 units of 2^-24), since a chunked step
  // rounds each chunk's partial result to fp32 before its merge.
  switch (out_dtype) {
    case DType::float32:
      return {1e-6, 1e-5};
    case DType::float16:
      return {5e-4, 1e-5};
    case DType::bfloat16:
      return {4e-3, 1e-5};
    case DType::float8_e4m3:
      return {6.25e-2, 1e-5};
  }
  return {};
}

::testing::AssertionResult agrees_with_oracle(const TensorView& out, const TensorView& lse,
                                              const OracleResult& oracle) {
  const ::testing::AssertionResult agrees =
      results_match(out, lse, oracle.out.view(), oracle.lse.view(), oracle_tolerance(out.dtype));
  if (agrees) return agrees;
  return ::testing::AssertionFailure() << "REFERENCE disagrees with the independent oracle: " << agrees.message();
}

}  // namespace mla::testing
