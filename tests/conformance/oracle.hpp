// The answers REFERENCE must give, computed apart from it: plain fp64 loops
// over host tensors, written from docs/contract.md §1-4 and sharing no code
// with backends/reference. The conformance suite holds every backend to
// REFERENCE; in the suite whose backend under test is REFERENCE itself, that
// comparison proves nothing, so there the tests also hold REFERENCE to these.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "conformance/test_tensors.hpp"

namespace mla::testing {

// An exact result, rounded once to float32: out [N, H, V] and lse [H, N]
// (natural log; -inf for rows without keys).
struct OracleResult {
  HostTensor out;
  HostTensor lse;
};

// Attention of a ragged batch: sequence b has q_lens[b] queries and
// k_lens[b] keys, stored one sequence after the other in q [Nq, H, dqk],
// k [Nk, H, dqk] and v [Nk, H, V]. With `causal` the last query of a
// sequence lines up with its last key (§1, bottom-right). With `out_scale`
// the output is divided by it and saturated to the fp8 e4m3 range (±448);
// the LSE stays that of the unscaled scores (§4).
// Per-head multipliers of q, k and v: float8_e4m3 inputs stand for their
// e4m3 value times these (§4). Empty vectors mean 1.
struct OracleDescales {
  std::vector<double> q, k, v;
};

// §12, as the contract words it: a key at position p of its sequence (p
// counts the sequence's keys from 0) is seen by query i at position
// keys - queries + i only when allowed(sequence, i, p) says so (no function:
// always) and, with a window W > 0, p > position - W. Each head's sink
// (none: -inf; empty: no sinks) joins the softmax's denominator but not the
// LSE.
struct OracleMask {
  std::function<bool(std::size_t sequence, std::int64_t query, std::int64_t position)> allowed;
  std::int64_t window = 0;
  std::vector<double> sinks;
};

OracleResult oracle_attention(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                              const std::vector<int>& q_lens, const std::vector<int>& k_lens, bool causal, double scale,
                              std::optional<double> out_scale = std::nullopt, const OracleDescales& descales = {},
                              const OracleMask& mask = {});

// merge_attn_states (§3): tokens at or past `tokens_with_context` copy the
// suffix; infinities of either sign mean an empty side; two empty sides give
// 0 and -inf. With `out_scale` as above.
// With `sinks` (§12, one per head), each head's sink joins the merged
// denominator (a copied token's too) and never the LSE.
OracleResult oracle_merge(const HostTensor& prefix_out, const HostTensor& prefix_lse, const HostTensor& suffix_out,
                          const HostTensor& suffix_lse, std::optional<std::int64_t> tokens_with_context,
                          std::optional<double> out_scale = std::nullopt, const std::vector<double>& sinks = {});

// How far REFERENCE (fp64, rounded once to `out_dtype`) may be from the
// oracle (fp64, rounded once to float32): the output dtype's rounding, and
// fp32 rounding of the LSE.
Tolerance oracle_tolerance(DType out_dtype);

// REFERENCE's result (views in host memory) against the oracle's.
::testing::AssertionResult agrees_with_oracle(const TensorView& out, const TensorView& lse, const OracleResult& oracle);

}  // namespace mla::testing
