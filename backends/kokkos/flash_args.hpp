// What both KOKKOS attention kernels take and do per work item, outside their
// products: flash_attention.cpp's fp32 loop and flash_bf16.cpp's AVX512-BF16
// one. The call's views and scalars, where an item's queries and keys lie,
// the reset of the online softmax state and the epilogue. The kernels differ
// in how they stage and multiply; these parts must not.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "flash_math.hpp"
#include "flash_work.hpp"
#include "kokkos_views.hpp"

namespace mla::kokkos {

// One call's inputs, outputs and scalars, as the kernels read them.
template <DType kIn, DType kOut>
struct FlashArgs {
  using In = typename Element<kIn>::Storage;
  using Out = typename Element<kOut>::Storage;
  typename StridedViewType<const In, 3>::type q, k, v;  // [Nq,H,dqk] [Nk,H,dqk] [Nk,H,dv]
  typename StridedViewType<Out, 3>::type out;           // [Nq,H,dv]
  typename StridedViewType<float, 2>::type lse;         // [H,Nq]; only with write_lse
  bool write_lse = false;
  const std::int32_t* cu_q = nullptr;  // [B+1], the caller's vectors
  const std::int32_t* cu_k = nullptr;
  const WorkItem* work = nullptr;  // the caller's list, alive for the call
  bool causal = true;
  float q_multiplier = 1.0f;    // softmax scale * log2(e): scores in log2 units
  float out_multiplier = 1.0f;  // 1 / fp8 scale, 1 otherwise
  // float8_e4m3 inputs: per head, q's descale times k's (folded into the
  // query multiplier) and v's (into the output's); null otherwise.
  const float* qk_descale = nullptr;
  const float* v_descale = nullptr;
  // docs/contract.md §12: the call's key mask (null when it has none) and
  // each head's sink logit times
  // log2(e), in the scores' log2 units (null: no sinks).
  const detail::HostKeyMask* mask = nullptr;
  const float* sinks_log2 = nullptr;

  // The query multiplier and the output multiplier of head `head`.
  float head_q_multiplier(int head) const { return qk_descale ? q_multiplier * qk_descale[head] : q_multiplier; }
  float head_out_multiplier(int head) const { return v_descale ? out_multiplier * v_descale[head] : out_multiplier; }

  // `qk_descales` holds problem's q descale times k descale per head (fp8
  // inputs); it and `items` must outlive the kernel.
  // `sinks_log2` holds problem's sinks times log2(e) (empty: none).
  FlashArgs(const AttentionProblem& problem, const std::vector<WorkItem>& items,
            const std::vector<float>& qk_descales = {}, const std::vector<float>& sinks_log2_values = {})
      : q(wrap<const In, 3>(problem.q)),
        k(wrap<const In, 3>(problem.k)),
        v(wrap<const In, 3>(problem.v)),
        out(wrap<Out, 3>(problem.out)),
        write_lse(!problem.lse.empty_view()),
        cu_q(problem.cu_q->data()),
        cu_k(problem.cu_k->data()),
        work(items.data()),
        causal(problem.causal),
        q_multiplier(problem.scale * numeric::log2e),
        out_multiplier(problem.out_scale ? 1.0f / *problem.out_scale : 1.0f),
        qk_descale(qk_descales.empty() ? nullptr : qk_descales.data()),
        v_descale(problem.v_descale.empty() ? nullptr : problem.v_descale.data()),
        mask(problem.mask.active() ? &problem.mask : nullptr),
        sinks_log2(sinks_log2_values.empty() ? nullptr : sinks_log2_values.data()) {
    if (write_lse) lse = wrap<float, 2>(problem.lse);
  }
};

// Each head's sink logit times log2(e), the scores' units (empty: no sinks).
inline std::vector<float> sinks_log2(const AttentionProblem& problem) {
  std::vector<float> values;
  for (float sink : problem.sinks) values.push_back(sink * numeric::log2e);
  return values;
}

// Where one work item's queries and keys lie, for tiles of `rows_q` queries.
struct ItemSpan {
  int sequence = 0;
  int q_begin = 0;     // the sequence's first query token
  int k_begin = 0;     // its first key token
  int tile_first = 0;  // the tile's first query within the sequence
  int rows = 0;        // queries in the tile
  int keys = 0;        // keys the tile's last row sees: the end of the key loop
  int diagonal = 0;    // query i sees keys j <= i + diagonal (causal, bottom-right)
};

inline ItemSpan item_span(const WorkItem& item, const std::int32_t* cu_q, const std::int32_t* cu_k, int rows_q,
                          bool causal) {
  ItemSpan span;
  span.sequence = item.sequence;
  span.q_begin = cu_q[item.sequence];
  const int sq = cu_q[item.sequence + 1] - span.q_begin;
  span.k_begin = cu_k[item.sequence];
  const int sk = cu_k[item.sequence + 1] - span.k_begin;
  span.tile_first = item.q_tile * rows_q;
  span.rows = imin(rows_q, sq - span.tile_first);
  span.keys = numeric::causal_key_end(span.tile_first + span.rows - 1, sq, sk, causal);
  span.diagonal = sk - sq;
  return span;
}

// docs/contract.md §12 in the tiled kernels. The first key tile (a multiple
// of `tile_cols`) that the window lets the item's first query see; 0
// without a mask or window.
inline int first_key_tile(const detail::HostKeyMask* mask, const ItemSpan& span, int tile_cols) {
  if (mask == nullptr || mask->window == 0) return 0;
  const std::int64_t first_seen = mask->window_start(static_cast<std::size_t>(span.sequence), span.tile_first);
  if (first_seen <= 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(first_seen, span.keys) / tile_cols * tile_cols);
}

// The call keys [begin, end) query `row` may see in the key tile [kv_first,
// kv_first + cols) by causality and the window (begin >= end: none).
inline void row_key_range(const detail::HostKeyMask& mask, const ItemSpan& span, bool causal, int row, int kv_first,
                          int cols, int& begin, int& end) {
  end = causal ? imin(kv_first + cols, row + span.diagonal + 1) : kv_first + cols;
  begin = kv_first;
  if (mask.window != 0) {
    const std::int64_t first = mask.window_start(static_cast<std::size_t>(span.sequence), row);
    if (first > begin) begin = static_cast<int>(std::min<std::int64_t>(first, kv_first + cols));
  }
}

// Bits [begin, end) of query `row`'s top-k words over the call's keys, up to
// 32 at a time: visit(first key, word, count), bit 0 of the word being that
// key and its bits from `count` on clear.
template <class Visit>
void for_each_mask_word(const detail::HostKeyMask& mask, const ItemSpan& span, int row, int begin, int end,
                        Visit&& visit) {
  const auto b = static_cast<std::size_t>(span.sequence);
  const std::int64_t offset = mask.key_position[b];
  const std::uint32_t* words = mask.row_words(b, row);
  for (std::int64_t position = offset + begin; position < offset + end;) {
    const std::int64_t bit = position % 32;
    const std::int64_t span_bits = std::min<std::int64_t>(32 - bit, offset + end - position);
    std::uint32_t word = words[position / 32] >> bit;
    if (span_bits < 32) word &= (1u << span_bits) - 1u;
    visit(static_cast<int>(position - offset), word, static_cast<int>(span_bits));
    position += span_bits;
  }
}

// Whether some query of the item sees some key of the tile [kv_first,
// kv_first + cols): a tile the mask and window hide from every query is
// never staged.
inline bool any_key_seen(const detail::HostKeyMask& mask, const ItemSpan& span, bool causal, int kv_first, int cols) {
  for (int r = 0; r < span.rows; ++r) {
    int begin = 0, end = 0;
    row_key_range(mask, span, causal, span.tile_first + r, kv_first, cols, begin, end);
    if (begin >= end) continue;
    if (mask.topk.empty()) return true;
    bool seen = false;
    for_each_mask_word(mask, span, span.tile_first + r, begin, end,
                       [&](int, std::uint32_t word, int) { seen = seen || word != 0; });
    if (seen) return true;
  }
  return false;
}

// Scores st[j][r] (row length `st_row`) of the tile's keys the window or
// the top-k bits hide become -inf, so their P is exactly 0; causality is
// the kernel's own.
inline void hide_masked_keys(const detail::HostKeyMask& mask, const ItemSpan& span, int kv_first, int cols, float* st,
                             int st_row) {
  for (int r = 0; r < span.rows; ++r) {
    int begin = 0, end = 0;
    row_key_range(mask, span, /*causal=*/false, span.tile_first + r, kv_first, cols, begin, end);
    for (int key = kv_first; key < begin; ++key) st[(key - kv_first) * st_row + r] = neg_infinity();
    if (mask.topk.empty()) continue;
    for_each_mask_word(mask, span, span.tile_first + r, begin, end, [&](int first, std::uint32_t word, int bits) {
      const std::uint32_t hidden = ~word;
      for (int t = 0; t < bits; ++t) {
        if ((hidden >> t) & 1u) st[(first + t - kv_first) * st_row + r] = neg_infinity();
      }
    });
  }
}

// The online softmax state of `rows` queries before the first key tile: max
// -inf, sum 0, and their `acc_cols` accumulators 0.
inline void reset_softmax_state(float* row_max, float* row_sum, float* acc, int rows, int acc_cols) {
  for (int r = 0; r < rows; ++r) {
    row_max[r] = neg_infinity();
    row_sum[r] = 0.0f;
    for (int c = 0; c < acc_cols; ++c) acc[r * acc_cols + c] = 0.0f;
  }
}

// The epilogue of `rows` queries from token `token`: out = acc / row sum
// (times the head's out multiplier), the first dv of acc_cols columns, and the
// natural-log LSE; a row without a visible key gets 0 and -inf
// (docs/contract.md §2). A head's sink joins the divisor, not the LSE (§12).
template <DType kIn, DType kOut>
void store_output(const FlashArgs<kIn, kOut>& args, const float* acc, int acc_cols, const float* row_max,
                  const float* row_sum, int token, int rows, int head, int dv) {
  constexpr float kLn2 = 0.6931471805599453f;
  const float multiplier = args.head_out_multiplier(head);
  const float sink = args.sinks_log2 ? args.sinks_log2[head] : neg_infinity();
  for (int r = 0; r < rows; ++r) {
    const float sum = row_sum[r];
    // exp2 of any sign: a sink far above the row's scores sends out to 0.
    const float divisor = sink == neg_infinity() ? sum : sum + kmath::exp2(sink - row_max[r]);
    const float inverse = sum > 0.0f ? multiplier / divisor : 0.0f;
    for (int c = 0; c < dv; ++c) args.out(token + r, head, c) = Element<kOut>::store(acc[r * acc_cols + c] * inverse);
    if (args.write_lse) {
      args.lse(head, token + r) = sum > 0.0f ? (row_max[r] + kmath::log2(sum)) * kLn2 : neg_infinity();
    }
  }
}

}  // namespace mla::kokkos
