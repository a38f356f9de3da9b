// Scalar pieces of the online softmax and of the LSE merge, shared by the
// CUDA and HIP kernels and checked on the host. Scores are kept in the log2
// domain (scaled by scale * log2(e)) so the kernels use exp2.
#pragma once

#include <cmath>

#include "mla/detail/host_device.hpp"
#include "mla/detail/numeric.hpp"

namespace mla::gpu {

inline constexpr float ln2 = 0.6931471805599453f;

// What a row subtracts before exp2: its running max, or 0 while no key has
// been seen, so that exp2(-inf - base) is 0 and never NaN (-inf - -inf).
MLA_HOST_DEVICE inline float exp2_base(float running_max_log2) {
  return running_max_log2 == -INFINITY ? 0.0f : running_max_log2;
}

// Factor that moves a row's sum and output from the old base to the new one.
MLA_HOST_DEVICE inline float rescale_factor(float old_max_log2, float new_base) {
  return exp2f(old_max_log2 - new_base);  // old max -inf: 0, nothing accumulated yet
}

// Natural-log LSE of a finished row from its max (log2 domain) and sum of
// exp2(s - max). A row that saw no key has sum 0: LSE -inf (docs/contract.md §2).
MLA_HOST_DEVICE inline float natural_lse(float max_log2, float sum) {
  return sum > 0.0f ? (max_log2 + log2f(sum)) * ln2 : -INFINITY;
}

// 1/sum, or 0 for a row without keys so its output is 0.
MLA_HOST_DEVICE inline float output_factor(float sum) { return sum > 0.0f ? 1.0f / sum : 0.0f; }

MLA_HOST_DEVICE inline bool is_infinite(float value) {
  return (numeric::float_bits(value) & 0x7fffffffu) == 0x7f800000u;
}

// docs/contract.md §12: 1 / (sum + the sink's weight at the row's base) for
// a row with max `max_log2` and `sum` of exp2(s - max), the sink
// `sink_log2` in the same units (-inf: none); 0 for a row without keys,
// sinks or not.
MLA_HOST_DEVICE inline float output_factor(float sum, float max_log2, float sink_log2) {
  if (!(sum > 0.0f)) return 0.0f;
  return 1.0f / (sum + exp2f(sink_log2 - exp2_base(max_log2)));
}

// What a row merged without its sink is multiplied by to put natural-log
// sink `sink` in its denominator: 1 / (1 + e^(sink - lse)); 0 for a row whose
// LSE is infinite (no keys: output 0, sinks or not).
MLA_HOST_DEVICE inline float sink_factor(float lse, float sink) {
  if (is_infinite(lse)) return 0.0f;
  return 1.0f / (1.0f + expf(sink - lse));
}

// Weights of one merge (docs/contract.md §3), natural logs.
struct MergeWeights {
  float prefix = 0.0f;
  float suffix = 0.0f;
  float lse = -INFINITY;
};

MLA_HOST_DEVICE inline MergeWeights merge_weights(float prefix_lse, float suffix_lse) {
  // +inf comes from libraries that mark empty rows that way; both infinities mean "no keys".
  const float p = is_infinite(prefix_lse) ? -INFINITY : prefix_lse;
  const float s = is_infinite(suffix_lse) ? -INFINITY : suffix_lse;
  const float m = fmaxf(p, s);
  MergeWeights weights;
  if (m == -INFINITY) return weights;  // both empty: 0 output, -inf LSE, no NaN
  const float pw = expf(p - m);
  const float sw = expf(s - m);
  const float z = pw + sw;
  weights.prefix = pw / z;
  weights.suffix = sw / z;
  weights.lse = m + logf(z);
  return weights;
}

}  // namespace mla::gpu
