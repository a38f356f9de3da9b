// Exact varlen attention. For each (sequence, head) the keys and values are
// gathered once into fp64 rows, so the strided, dtype-generic loads cost
// O(keys) rather than O(queries * keys); scores, softmax and the weighted sum
// of values are then plain fp64 loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "mla/detail/numeric.hpp"
#include "reference_backend.hpp"

namespace mla::reference {
namespace {

// Row `token`, head `head` of a [tokens, heads, dim] view, converted to fp64
// and multiplied by the head's descale (float8_e4m3 inputs; exact in fp64).
void gather_row(const TensorView& view, const std::vector<float>& descale, std::int64_t token, std::int64_t head,
                double* row) {
  const std::int64_t dim = view.size(2);
  const std::int64_t base = view.offset(token, head);
  const double factor = descale.empty() ? 1.0 : static_cast<double>(descale[static_cast<std::size_t>(head)]);
  for (std::int64_t d = 0; d < dim; ++d)
    row[d] = load_as_float(view.data, view.dtype, base + d * view.stride[2]) * factor;
}

// Four partial sums break the add-latency chain; the order change is far below
// fp64 rounding of the fp32-sized quantities involved.
double dot(const double* a, const double* b, std::int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < n; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

void store_output(const TensorView& out, std::int64_t index, double value, const std::optional<float>& out_scale) {
  if (out_scale) value /= static_cast<double>(*out_scale);
  store_from_float(out.data, out.dtype, index, static_cast<float>(value));
}

// Writes one output row (and its LSE when requested).
void write_row(const AttentionProblem& problem, std::int64_t token, std::int64_t head, const std::vector<double>& row,
               double lse) {
  const std::int64_t base = problem.out.offset(token, head);
  for (std::size_t d = 0; d < row.size(); ++d)
    store_output(problem.out, base + static_cast<std::int64_t>(d) * problem.out.stride[2], row[d], problem.out_scale);
  if (!problem.lse.empty_view())
    store_from_float(problem.lse.data, DType::float32, problem.lse.offset(head, token), static_cast<float>(lse));
}

}  // namespace

void attention(const AttentionProblem& problem) {
  const std::vector<std::int32_t>& cu_q = *problem.cu_q;
  const std::vector<std::int32_t>& cu_k = *problem.cu_k;
  const std::int64_t heads = problem.q.size(1);
  const std::int64_t dqk = problem.q.size(2);
  const std::int64_t dv = problem.v.size(2);
  const double neg_inf = -std::numeric_limits<double>::infinity();

  std::vector<double> keys, values, query(static_cast<std::size_t>(dqk)), scores;
  std::vector<double> row(static_cast<std::size_t>(dv));
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const std::int64_t q0 = cu_q[b], sq = cu_q[b + 1] - cu_q[b];
    const std::int64_t k0 = cu_k[b], sk = cu_k[b + 1] - cu_k[b];
    if (sq == 0) continue;
    keys.resize(static_cast<std::size_t>(sk * dqk));
    values.resize(static_cast<std::size_t>(sk * dv));
    scores.resize(static_cast<std::size_t>(sk));
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t j = 0; j < sk; ++j) {
        gather_row(problem.k, problem.k_descale, k0 + j, h, keys.data() + j * dqk);
        gather_row(problem.v, problem.v_descale, k0 + j, h, values.data() + j * dv);
      }
      const double sink = problem.sinks.empty() ? neg_inf : static_cast<double>(problem.sinks[h]);
      for (std::int64_t i = 0; i < sq; ++i) {
        const std::int64_t visible = numeric::causal_key_end(i, sq, sk, problem.causal);
        std::fill(row.begin(), row.end(), 0.0);
        gather_row(problem.q, problem.q_descale, q0 + i, h, query.data());
        // Keys the mask hides (docs/contract.md §12) get no score and weight 0.
        double max_score = neg_inf;
        for (std::int64_t j = 0; j < visible; ++j) {
          const bool seen = !problem.mask.active() || problem.mask.sees(b, i, j);
          scores[static_cast<std::size_t>(j)] =
              seen ? problem.scale * dot(query.data(), keys.data() + j * dqk, dqk) : neg_inf;
          max_score = std::max(max_score, scores[static_cast<std::size_t>(j)]);
        }
        if (max_score == neg_inf) {  // no key in view: 0 and -inf (§2), whatever the sink
          write_row(problem, q0 + i, h, row, neg_inf);
          continue;
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < visible; ++j) {
          if (scores[static_cast<std::size_t>(j)] == neg_inf) continue;
          const double weight = std::exp(scores[static_cast<std::size_t>(j)] - max_score);
          sum += weight;
          const double* value = values.data() + j * dv;
          for (std::int64_t d = 0; d < dv; ++d) row[static_cast<std::size_t>(d)] += weight * value[d];
        }
        // The sink joins the denominator only; the LSE stays without it.
        const double denominator = sum + std::exp(sink - max_score);
        for (double& x : row) x /= denominator;
        write_row(problem, q0 + i, h, row, max_score + std::log(sum));
      }
    }
  }
}

}  // namespace mla::reference
