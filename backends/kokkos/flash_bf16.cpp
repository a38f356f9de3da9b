// FlashAttention-2 for bf16 inputs on AVX512-BF16: flash_attention.cpp's
// kernel (same work items, tiles, transposed scores and online softmax in
// log2 units) with the operands kept in bf16 and both products done by
// vdpbf16ps (bf16_dot_loops.hpp), fp32 accumulation. As in the GPU kernels,
// P is rounded to bf16 for the value product while the row sums add P in
// fp32. An item keeps in its thread's scratch, in 32-bit words (a "pair" is
// two bf16 numbers along the products' depth, bf16_dot_loops.hpp):
//   qt  [dqk/2][Br]    pairs of Q^T, unscaled (the scale is applied to S in fp32)
//   kp  [Bc][dqk/2]    pairs of the key tile's rows
//   vp  [Bc/2][dv']    pairs of two keys' values (dv' = dv rounded to 32)
//   st  [Bc][Br]       fp32 scores S^T
//   pt  [Bc/2][Br]     pairs of P^T in bf16
//   acc [Br][dv']      fp32 unnormalised output
//   row_max, row_sum, row_alpha [Br]
// Odd head dims and odd key counts are completed with zero halves.
#include "flash_bf16.hpp"

#include "host_isa.hpp"
#include "mla/error.hpp"

#if MLA_KOKKOS_ISA_DISPATCH

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "bf16_dot_loops.hpp"
#include "flash_args.hpp"
#include "flash_work.hpp"
#include "host_parallel.hpp"
#include "kokkos_views.hpp"

namespace mla::kokkos {
namespace {

// Query rows per item, keys per tile, rows of a register block: the fp32
// avx512 row of flash_config.hpp (192 queries were 2% faster than 96 at 4k
// tokens here too). Blocks of 8 rows x 32 columns hold 16 accumulators,
// enough independent chains to cover vdpbf16ps' latency on both of a
// core's pipes, and 8 divides both tile sizes, so no key row is padded.
constexpr int kBr = 192;
constexpr int kBc = 64;
constexpr int kRb = 8;
constexpr int kNc = bf16_dot::kBlockCols;
static_assert(kBr % kRb == 0 && kBr % kNc == 0 && kBc % kRb == 0 && kBc % 2 == 0);
constexpr int kStageAhead = 4;  // rows the Q and K/V staging ask for ahead of their copy

// Offsets (in 32-bit words) of the scratch arrays of one work item.
struct Bf16Layout {
  int dqk = 0, dv = 0, dqk_pairs = 0, dv_padded = 0;
  int qt = 0, kp = 0, vp = 0, st = 0, pt = 0, acc = 0, row_max = 0, row_sum = 0, row_alpha = 0, total = 0;

  Bf16Layout(int qk_dim, int v_dim)
      : dqk(qk_dim), dv(v_dim), dqk_pairs((qk_dim + 1) / 2), dv_padded(round_up(v_dim, kNc)) {
    int at = 0;
    // Each array starts on a 64-byte boundary for aligned vector loads.
    auto place = [&at](int words) {
      const int begin = at;
      at += round_up(words, 16);
      return begin;
    };
    qt = place(dqk_pairs * kBr);
    kp = place(kBc * dqk_pairs);
    vp = place(kBc / 2 * dv_padded);
    st = place(kBc * kBr);
    pt = place(kBc / 2 * kBr);
    acc = place(kBr * dv_padded);
    row_max = place(kBr);
    row_sum = place(kBr);
    row_alpha = place(kBr);
    total = at;
  }
};

template <DType kOut>
struct FlashBf16Kernel {
  using In = typename Element<DType::bfloat16>::Storage;
  FlashArgs<DType::bfloat16, kOut> args;
  Bf16Layout layout;

  void operator()(std::int64_t index) const {
    const WorkItem item = args.work[index];
    const ItemSpan span = item_span(item, args.cu_q, args.cu_k, kBr, args.causal);
    const int rows = span.rows;

    auto* scratch = reinterpret_cast<std::uint32_t*>(thread_scratch(static_cast<std::size_t>(layout.total)));
    float* acc = reinterpret_cast<float*>(scratch + layout.acc);
    float* row_max = reinterpret_cast<float*>(scratch + layout.row_max);
    float* row_sum = reinterpret_cast<float*>(scratch + layout.row_sum);
    float* row_alpha = reinterpret_cast<float*>(scratch + layout.row_alpha);
    float* st = reinterpret_cast<float*>(scratch + layout.st);

    stage_queries(scratch + layout.qt, span.q_begin + span.tile_first, rows, item.head);
    reset_softmax_state(row_max, row_sum, acc, kBr, layout.dv_padded);
    const int score_blocks = round_up(round_up(rows, kRb), kNc) / kNc;  // every row the value product reads
    const int value_rows = round_up(rows, kRb) / kRb;
    for (int kv_first = first_key_tile(args.mask, span, kBc); kv_first < span.keys; kv_first += kBc) {
      const int cols = imin(kBc, span.keys - kv_first);
      // A tile the key mask hides from every query is never staged (§12).
      if (args.mask != nullptr && !any_key_seen(*args.mask, span, args.causal, kv_first, cols)) continue;
      stage_keys_values(scratch, span.k_begin + kv_first, cols, item.head);
      // st[j][r] = q_r . k_j: blocks of kRb keys x kNc queries, keys fastest
      // so one column slice of qt stays in L1.
      // Query r sees key j iff j <= r + shift; in a masked tile, blocks no
      // query of the block sees are skipped (the softmax sets them to -inf
      // before reading), as in flash_attention.cpp.
      const int shift = span.tile_first + span.diagonal - kv_first;
      const bool masked = args.causal && cols - 1 > shift;
      const int key_blocks = round_up(cols, kRb) / kRb;
      for (int block = 0; block < key_blocks * score_blocks; ++block) {
        const int j = (block % key_blocks) * kRb;
        const int r = (block / key_blocks) * kNc;
        if (masked && j > r + kNc - 1 + shift) continue;
        bf16_dot::dot_block<kRb>(scratch + layout.kp + j * layout.dqk_pairs, layout.dqk_pairs, 1,
                                 scratch + layout.qt + r, kBr, layout.dqk_pairs, st + j * kBr + r, kBr, nullptr);
      }
      if (args.mask != nullptr) hide_masked_keys(*args.mask, span, kv_first, cols, st, kBr);
      for (int block = 0; block < score_blocks; ++block) {
        bf16_dot::softmax_block<kBr, kNc>(st, scratch + layout.pt, row_max, row_sum, row_alpha, block * kNc, cols,
                                          masked, shift, args.q_multiplier);
      }
      // acc[r][:] = acc[r][:] * row_alpha[r] + sum_j P[r][j] v[j][:], each
      // block's depth ending after the last key its queries see (P = 0
      // after it).
      for (int block = 0; block < value_rows * (layout.dv_padded / kNc); ++block) {
        const int r = (block % value_rows) * kRb;
        const int c = (block / value_rows) * kNc;
        const int depth = masked ? imin(cols, imax(0, r + kRb + shift)) : cols;
        const int pairs = (depth + 1) / 2;
        bf16_dot::dot_block<kRb>(scratch + layout.pt + r, 1, kBr, scratch + layout.vp + c, layout.dv_padded, pairs,
                                 acc + r * layout.dv_padded + c, layout.dv_padded, row_alpha + r);
      }
    }
    store_output(args, acc, layout.dv_padded, row_max, row_sum, span.q_begin + span.tile_first, rows, item.head,
                 layout.dv);
  }

  // The pair of elements d and d + 1 of a row (d + 1 past the end reads 0).
  static std::uint32_t pair_at(const In* row, std::ptrdiff_t stride, int d, int dim) {
    const std::uint32_t odd = d + 1 < dim ? row[(d + 1) * stride] : 0u;
    return row[d * stride] | (odd << 16);
  }

  // qt[p][r] = pair p of query r; rows past the tile end are 0.
  void stage_queries(std::uint32_t* qt, int token, int rows, int head) const {
    const auto& q = args.q;
    const auto stride = static_cast<std::ptrdiff_t>(q.stride_2());
    for (int r = 0; r < kBr; ++r) {
      if (stride == 1 && r + kStageAhead < rows) {
        prefetch_to_l1(&q(token + r + kStageAhead, head, 0), sizeof(In) * static_cast<std::size_t>(layout.dqk));
      }
      const In* row = r < rows ? &q(token + r, head, 0) : nullptr;
      for (int p = 0; p < layout.dqk_pairs; ++p) qt[p * kBr + r] = row ? pair_at(row, stride, 2 * p, layout.dqk) : 0u;
    }
  }

  // kp[j][p] = pair p of key j, key rows up to the register block 0;
  // vp[j/2][c] = values of keys j and j + 1 (key `cols` and columns past
  // dv 0, so the value product reads finite zeros there).
  void stage_keys_values(std::uint32_t* scratch, int token, int cols, int head) const {
    const auto& k = args.k;
    const auto& v = args.v;
    std::uint32_t* kp = scratch + layout.kp;
    std::uint32_t* vp = scratch + layout.vp;
    const int dqk_pairs = layout.dqk_pairs;
    const auto k_stride = static_cast<std::ptrdiff_t>(k.stride_2());
    const auto v_stride = static_cast<std::ptrdiff_t>(v.stride_2());
    const bool unit_strides = k_stride == 1 && v_stride == 1;
    for (int j = 0; j < round_up(cols, kRb); ++j) {
      std::uint32_t* k_row = kp + j * dqk_pairs;
      // Rows a few ahead of the copy, as in flash_attention.cpp.
      if (unit_strides && j + kStageAhead < cols) {
        prefetch_to_l1(&k(token + j + kStageAhead, head, 0), sizeof(In) * static_cast<std::size_t>(layout.dqk));
        prefetch_to_l1(&v(token + j + kStageAhead, head, 0), sizeof(In) * static_cast<std::size_t>(layout.dv));
      }
      if (j >= cols) {
        for (int p = 0; p < dqk_pairs; ++p) k_row[p] = 0u;
      } else if (k_stride == 1 && layout.dqk % 2 == 0) {
        std::memcpy(k_row, &k(token + j, head, 0), sizeof(std::uint32_t) * static_cast<std::size_t>(dqk_pairs));
      } else {
        const In* row = &k(token + j, head, 0);
        for (int p = 0; p < dqk_pairs; ++p) k_row[p] = pair_at(row, k_stride, 2 * p, layout.dqk);
      }
    }
    for (int j = 0; j < cols; j += 2) {
      std::uint32_t* v_row = vp + (j / 2) * layout.dv_padded;
      bf16_dot::pair_rows(v_row, &v(token + j, head, 0), j + 1 < cols ? &v(token + j + 1, head, 0) : nullptr, v_stride,
                          layout.dv);
      for (int c = layout.dv; c < layout.dv_padded; ++c) v_row[c] = 0u;
    }
  }
};

template <DType kOut>
void launch(const AttentionProblem& problem) {
  using Kernel = FlashBf16Kernel<kOut>;
  const int heads = static_cast<int>(problem.q.shape[1]);
  const std::vector<WorkItem> work = build_work_list(problem, heads, kBr);
  if (work.empty()) return;
  const std::vector<float> sinks = sinks_log2(problem);
  const Kernel kernel{FlashArgs<DType::bfloat16, kOut>(problem, work, {}, sinks),
                      Bf16Layout(static_cast<int>(problem.q.shape[2]), static_cast<int>(problem.v.shape[2]))};
  for_each_item("mla_kokkos_flash_attention_bf16_dot", static_cast<std::int64_t>(work.size()), kernel);
}

}  // namespace

void flash_attention_bf16_dot(const AttentionProblem& problem) {
  if (problem.out.dtype == DType::float8_e4m3) {
    launch<DType::float8_e4m3>(problem);
  } else {
    launch<DType::bfloat16>(problem);
  }
}

}  // namespace mla::kokkos

#else

namespace mla::kokkos {

void flash_attention_bf16_dot(const AttentionProblem&) {
  raise(ErrorCategory::not_supported, "KOKKOS: this build has no AVX512-BF16 path (no run-time ISA dispatch)");
}

}  // namespace mla::kokkos

#endif
