// FlashAttention-2 on Kokkos' default host execution space.
//
// One work item per (sequence, query tile, head), each computed alone by one
// thread (host_parallel.hpp spreads them over the host space's threads); the
// list is ordered longest first so dynamic scheduling never ends on a long
// straggler (see build_work_list). An item keeps in its thread's scratch, all
// fp32:
//   qt  [dqk][Br]      the query tile, transposed, pre-multiplied by scale*log2(e)
//   kr  [Bc'][dqk]     the current key tile       (Bc' = Bc rounded to block rows)
//   vr  [Bc][dv']      the current value tile     (dv' = dv rounded to block cols)
//   st  [Bc'][Br]      scores S^T, then probabilities P^T, key-major
//   acc [Br][dv']      unnormalised output
//   row_max, row_sum, row_alpha [Br]: online softmax state per query, log2 units
//
// Scores are computed transposed (S^T = K * Q^T) so that the softmax state of
// Br queries is a vector across queries: the column max, exp2 and column sum
// over keys are lane-wise operations with no horizontal reduction, which g++
// vectorises without -ffast-math. Both products run through micro_gemm; its
// innermost loop is a unit-stride FMA over queries (S^T) or over dv (O).
// Causal tiles entirely above the diagonal are never visited; the diagonal
// tile is masked per (key, query) pair.
#include "flash_attention.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "avx512_block.hpp"
#include "flash_args.hpp"
#include "flash_bf16.hpp"
#include "flash_config.hpp"
#include "flash_work.hpp"
#include "host_parallel.hpp"
#include "hot_loops.hpp"
#include "kokkos_views.hpp"
#include "mla/error.hpp"

namespace mla::kokkos {
namespace {

// Offsets (in floats) of the scratch arrays of one work item.
struct ScratchLayout {
  int dqk = 0, dv = 0, dv_padded = 0;
  int qt = 0, kr = 0, vr = 0, st = 0, acc = 0, row_max = 0, row_sum = 0, row_alpha = 0, total = 0;

  ScratchLayout(int qk_dim, int v_dim, FlashTile tile)
      : dqk(qk_dim), dv(v_dim), dv_padded(round_up(v_dim, tile.block_cols)) {
    const int br = tile.rows_q;
    const int bc_padded = round_up(tile.cols_kv, tile.block_rows);
    int at = 0;
    // Each array starts on a 64-byte boundary for aligned vector loads.
    auto place = [&at](int floats) {
      const int begin = at;
      at += round_up(floats, 16);
      return begin;
    };
    qt = place(dqk * br);
    kr = place(bc_padded * dqk);
    vr = place(tile.cols_kv * dv_padded);
    st = place(bc_padded * br);
    acc = place(br * dv_padded);
    row_max = place(br);
    row_sum = place(br);
    row_alpha = place(br);
    total = at;
  }
};

template <DType kIn, DType kOut, HostIsa kIsa>
struct FlashKernel {
  using Hot = HotLoops<kIsa>;
  static constexpr FlashTile kTile = flash_tile_for(kIsa);
  static constexpr int kBr = kTile.rows_q;
  static constexpr int kBc = kTile.cols_kv;
  static constexpr int kRb = kTile.block_rows;
  static constexpr int kNc = kTile.block_cols;
  using In = typename Element<kIn>::Storage;
  FlashArgs<kIn, kOut> args;
  ScratchLayout layout;

  void operator()(std::int64_t index) const {
    const WorkItem item = args.work[index];
    const ItemSpan span = item_span(item, args.cu_q, args.cu_k, kBr, args.causal);
    const int rows = span.rows;

    float* scratch = thread_scratch(static_cast<std::size_t>(layout.total));
    float* acc = scratch + layout.acc;
    float* row_max = scratch + layout.row_max;
    float* row_sum = scratch + layout.row_sum;

    stage_queries(scratch + layout.qt, span.q_begin + span.tile_first, rows, item.head);
    reset_softmax_state(row_max, row_sum, acc, kBr, layout.dv_padded);
    for (int kv_first = first_key_tile(args.mask, span, kBc); kv_first < span.keys; kv_first += kBc) {
      const int cols = imin(kBc, span.keys - kv_first);
      // Query r sees key j of this tile iff j <= r + shift; `masked` when
      // some query of the tile does not see some key of it.
      const int shift = span.tile_first + span.diagonal - kv_first;
      const bool masked = args.causal && cols - 1 > shift;
      // A tile the key mask hides from every query is never staged (§12).
      if (args.mask != nullptr && !any_key_seen(*args.mask, span, args.causal, kv_first, cols)) continue;
      stage_keys_values(scratch, span.k_begin + kv_first, cols, item.head);
      scores(scratch, rows, cols, masked, shift);
      if (args.mask != nullptr) hide_masked_keys(*args.mask, span, kv_first, cols, scratch + layout.st, kBr);
      softmax_update(scratch, rows, cols, masked, shift);
      accumulate_values(scratch, rows, cols, masked, shift);
    }
    store_output(args, acc, layout.dv_padded, row_max, row_sum, span.q_begin + span.tile_first, rows, item.head,
                 layout.dv);
  }

  // Rows the staging loops ask for ahead of the one they copy, so several
  // rows' misses overlap (each row is a separate stream of a few hundred
  // bytes); 4 halved the copy's time on a 4k-token head, 8 did worse.
  static constexpr int kStageAhead = 4;

  // qt[d][r] = q[token r][head][d] * q_multiplier; rows past the tile end are 0.
  void stage_queries(float* qt, int token, int rows, int head) const {
    const auto& q = args.q;
    const float q_multiplier = args.head_q_multiplier(head);
    const int dqk = layout.dqk;
    for (int r = 0; r < kBr; ++r) {
      if (r + kStageAhead < rows && q.stride_2() == 1) {
        prefetch_to_l1(&q(token + r + kStageAhead, head, 0), sizeof(In) * static_cast<std::size_t>(dqk));
      }
      if (r < rows) {
        for (int d = 0; d < dqk; ++d) qt[d * kBr + r] = Element<kIn>::load(q(token + r, head, d)) * q_multiplier;
      } else {
        for (int d = 0; d < dqk; ++d) qt[d * kBr + r] = 0.0f;
      }
    }
  }

  // kr[j][d] and vr[j][c] in fp32; key rows up to the register block are 0
  // so the score product reads finite values there.
  void stage_keys_values(float* scratch, int token, int cols, int head) const {
    const auto& k = args.k;
    const auto& v = args.v;
    float* kr = scratch + layout.kr;
    float* vr = scratch + layout.vr;
    const int dqk = layout.dqk;
    const int dv = layout.dv;
    const int dv_padded = layout.dv_padded;
    for (int j = 0; j < round_up(cols, kRb); ++j) {
      float* k_row = kr + j * dqk;
      if (j < cols) {
        if (j + kStageAhead < cols && k.stride_2() == 1 && v.stride_2() == 1) {
          prefetch_to_l1(&k(token + j + kStageAhead, head, 0), sizeof(In) * static_cast<std::size_t>(dqk));
          prefetch_to_l1(&v(token + j + kStageAhead, head, 0), sizeof(In) * static_cast<std::size_t>(dv));
        }
        Hot::template load_row<kIn>(k_row, &k(token + j, head, 0), static_cast<std::ptrdiff_t>(k.stride_2()), dqk);
        float* v_row = vr + j * dv_padded;
        Hot::template load_row<kIn>(v_row, &v(token + j, head, 0), static_cast<std::ptrdiff_t>(v.stride_2()), dv);
        for (int c = dv; c < dv_padded; ++c) v_row[c] = 0.0f;
      } else {
        for (int d = 0; d < dqk; ++d) k_row[d] = 0.0f;
      }
    }
  }

  // One kRb x kNc register block of either product (micro_gemm_body's
  // contract); the avx512 variant's is written with intrinsics.
  static void gemm_block(const float* a, int a_row, int a_depth, const float* b, int ldb, int depth, float* c, int ldc,
                         const float* row_scale) {
#if MLA_KOKKOS_ISA_DISPATCH
    if constexpr (kIsa == HostIsa::avx512 && kNc == 32) {
      return avx512::fma_block<kRb>(a, a_row, a_depth, b, ldb, depth, c, ldc, row_scale);
    }
#endif
    if (row_scale != nullptr) {
      Hot::template micro_gemm<kRb, kNc>(a, a_row, a_depth, b, ldb, depth, c, ldc, row_scale);
    } else {
      Hot::template micro_gemm<kRb, kNc>(a, a_row, a_depth, b, ldb, depth, c, ldc, nullptr);
    }
  }

  // Query columns of S^T that are computed: every row the value product
  // reads (rows rounded up to kRb), rounded up to whole kNc blocks. Padded
  // queries have zero q, so their scores stay finite.
  KOKKOS_INLINE_FUNCTION static int score_query_blocks(int rows) { return round_up(round_up(rows, kRb), kNc) / kNc; }

  // st[j][r] = sum_d kr[j][d] * qt[d][r]: register blocks of kRb keys x kNc
  // queries. The block index runs over keys fastest, so one kNc-wide column
  // slice of qt (dqk x kNc floats) is reused from L1 by every key block.
  // In a masked tile, blocks whose keys no query of the block sees are
  // skipped: softmax_block_body sets those scores to -inf before reading
  // them.
  void scores(float* scratch, int rows, int cols, bool masked, int shift) const {
    const float* kr = scratch + layout.kr;
    const float* qt = scratch + layout.qt;
    float* st = scratch + layout.st;
    const int dqk = layout.dqk;
    const int key_blocks = round_up(cols, kRb) / kRb;
    const int query_blocks = score_query_blocks(rows);
    for (int block = 0; block < key_blocks * query_blocks; ++block) {
      const int j = (block % key_blocks) * kRb;
      const int r = (block / key_blocks) * kNc;
      if (masked && j > r + kNc - 1 + shift) continue;
      gemm_block(kr + j * dqk, dqk, 1, qt + r, kBr, dqk, st + j * kBr + r, kBr, nullptr);
    }
  }

  // Online softmax over this tile's keys (softmax_block_body): P^T in st, the
  // new running max/sum, and row_alpha = exp2(old max - new max).
  void softmax_update(float* scratch, int rows, int cols, bool masked, int shift) const {
    float* st = scratch + layout.st;
    float* row_max = scratch + layout.row_max;
    float* row_sum = scratch + layout.row_sum;
    float* row_alpha = scratch + layout.row_alpha;
    for (int block = 0; block < score_query_blocks(rows); ++block) {
      Hot::template softmax_block<kBr, kNc>(st, row_max, row_sum, row_alpha, block * kNc, cols, masked, shift);
    }
  }

  // acc[r][:] = acc[r][:] * row_alpha[r] + sum_j st[j][r] * vr[j][:].
  // In a masked tile a block's depth ends after the last key its queries
  // see: the keys after it have P = 0 exactly, so the sums are the same.
  void accumulate_values(float* scratch, int rows, int cols, bool masked, int shift) const {
    const float* st = scratch + layout.st;
    const float* vr = scratch + layout.vr;
    const float* row_alpha = scratch + layout.row_alpha;
    float* acc = scratch + layout.acc;
    const int dv_padded = layout.dv_padded;
    const int query_blocks = round_up(rows, kRb) / kRb;
    const int value_blocks = dv_padded / kNc;
    for (int block = 0; block < query_blocks * value_blocks; ++block) {
      const int r = (block % query_blocks) * kRb;
      const int c = (block / query_blocks) * kNc;
      const int depth = masked ? imin(cols, imax(0, r + kRb + shift)) : cols;
      gemm_block(st + r, 1, kBr, vr + c, dv_padded, depth, acc + r * dv_padded + c, dv_padded, row_alpha + r);
    }
  }
};

template <DType kIn, DType kOut, HostIsa kIsa>
void launch(const AttentionProblem& problem) {
  using Kernel = FlashKernel<kIn, kOut, kIsa>;
  const int heads = static_cast<int>(problem.q.shape[1]);
  const std::vector<WorkItem> work = build_work_list(problem, heads, Kernel::kBr);
  if (work.empty()) return;
  // fp8 scores are q_code . k_code times both descales: one factor per head.
  std::vector<float> qk_descales;
  for (std::size_t h = 0; h < problem.q_descale.size(); ++h)
    qk_descales.push_back(problem.q_descale[h] * problem.k_descale[h]);
  const std::vector<float> sinks = sinks_log2(problem);
  const Kernel kernel{
      FlashArgs<kIn, kOut>(problem, work, qk_descales, sinks),
      ScratchLayout(static_cast<int>(problem.q.shape[2]), static_cast<int>(problem.v.shape[2]), Kernel::kTile)};
  for_each_item("mla_kokkos_flash_attention", static_cast<std::int64_t>(work.size()), kernel);
}

template <DType kIn, HostIsa kIsa>
void launch_for_output(const AttentionProblem& problem) {
  if (problem.out.dtype == DType::float8_e4m3) {
    launch<kIn, DType::float8_e4m3, kIsa>(problem);
  } else if constexpr (kIn == DType::float8_e4m3) {
    // fp8 inputs write float16 or bfloat16 (BackendParams::out_dtype).
    if (problem.out.dtype == DType::float16) {
      launch<kIn, DType::float16, kIsa>(problem);
    } else {
      launch<kIn, DType::bfloat16, kIsa>(problem);
    }
  } else {
    launch<kIn, kIn, kIsa>(problem);
  }
}

template <DType kIn>
void launch_for_input(const AttentionProblem& problem) {
#if MLA_KOKKOS_ISA_DISPATCH
  switch (selected_host_isa()) {
    case HostIsa::avx512:
      // The bf16 kernel scales the scores after the mask hid them (-inf),
      // which only a positive scale keeps -inf.
      if (kIn == DType::bfloat16 && selected_bf16_dot() && (!problem.mask.active() || problem.scale > 0.0f))
        return flash_attention_bf16_dot(problem);
      return launch_for_output<kIn, HostIsa::avx512>(problem);
    case HostIsa::avx2:
      return launch_for_output<kIn, HostIsa::avx2>(problem);
    case HostIsa::baseline:
      break;
  }
  launch_for_output<kIn, HostIsa::baseline>(problem);
#else
  launch_for_output<kIn, compiled_host_isa>(problem);
#endif
}

}  // namespace

void flash_attention(const AttentionProblem& problem) {
  switch (problem.q.dtype) {
    case DType::float32:
      return launch_for_input<DType::float32>(problem);
    case DType::float16:
      return launch_for_input<DType::float16>(problem);
    case DType::bfloat16:
      return launch_for_input<DType::bfloat16>(problem);
    case DType::float8_e4m3:
      return launch_for_input<DType::float8_e4m3>(problem);
  }
  raise(ErrorCategory::internal, "KOKKOS: unknown input dtype");
}

}  // namespace mla::kokkos
