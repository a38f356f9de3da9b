// FlashAttention-2 with Kokkos hierarchical parallelism.
//
// One team per work item (sequence, query tile, head); the work list is built
// on the host, longest first within each (sequence, head) so dynamic
// scheduling never ends on a long straggler (see build_work_list). A team
// keeps in scratch, all fp32:
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

#include "flash_config.hpp"
#include "hot_loops.hpp"
#include "kokkos_views.hpp"
#include "mla/error.hpp"

namespace mla::kokkos {
namespace {

constexpr float kLn2 = 0.6931471805599453f;

KOKKOS_INLINE_FUNCTION int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

struct WorkItem {
  int sequence;
  int q_tile;
  int head;
};

using WorkList = Kokkos::View<WorkItem*, MemSpace>;
using CuSeqlens = Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
using Member = Policy::member_type;

// Offsets (in floats) of the scratch arrays of one team.
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
    total = at + 16;  // room to align the base pointer
  }
  KOKKOS_INLINE_FUNCTION std::size_t bytes() const { return static_cast<std::size_t>(total) * sizeof(float); }
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
  using Out = typename Element<kOut>::Storage;
  typename StridedViewType<const In, 3>::type q, k, v;  // [Nq,H,dqk] [Nk,H,dqk] [Nk,H,dv]
  typename StridedViewType<Out, 3>::type out;           // [Nq,H,dv]
  typename StridedViewType<float, 2>::type lse;         // [H,Nq]
  bool write_lse = false;
  Kokkos::View<const std::int32_t*, MemSpace> cu_q, cu_k;
  WorkList work;
  ScratchLayout layout;
  int scratch_level = 0;
  bool causal = true;
  float q_multiplier = 1.0f;    // softmax scale * log2(e): scores come out in log2 units
  float out_multiplier = 1.0f;  // 1 / fp8 scale, 1 otherwise

  KOKKOS_FUNCTION void operator()(const Member& member) const {
    const WorkItem item = work(member.league_rank());
    const int q_begin = cu_q(item.sequence);
    const int sq = cu_q(item.sequence + 1) - q_begin;
    const int k_begin = cu_k(item.sequence);
    const int sk = cu_k(item.sequence + 1) - k_begin;
    const int tile_first = item.q_tile * kBr;  // first query of the tile within its sequence
    const int rows = imin(kBr, sq - tile_first);
    // What the tile's last row sees: the key loop's end.
    const int keys = numeric::causal_key_end(tile_first + rows - 1, sq, sk, causal);
    // Query i sees keys j <= i + diagonal (the same rule, per element).
    const int diagonal = sk - sq;

    float* scratch = aligned_scratch(member);
    float* qt = scratch + layout.qt;
    float* acc = scratch + layout.acc;
    float* row_max = scratch + layout.row_max;
    float* row_sum = scratch + layout.row_sum;

    stage_queries(member, qt, q_begin + tile_first, rows, item.head);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kBr), [&](int r) {
      row_max[r] = neg_infinity();
      row_sum[r] = 0.0f;
      for (int c = 0; c < layout.dv_padded; ++c) acc[r * layout.dv_padded + c] = 0.0f;
    });
    member.team_barrier();

    for (int kv_first = 0; kv_first < keys; kv_first += kBc) {
      const int cols = imin(kBc, keys - kv_first);
      stage_keys_values(member, scratch, k_begin + kv_first, cols, item.head);
      member.team_barrier();
      scores(member, scratch, rows, cols);
      member.team_barrier();
      // Query r sees key j of this tile iff j <= r + first_visible_shift.
      const int shift = tile_first + diagonal - kv_first;
      softmax_update(member, scratch, rows, cols, causal && cols - 1 > shift, shift);
      member.team_barrier();
      accumulate_values(member, scratch, rows, cols);
      member.team_barrier();
    }
    store_output(member, scratch, q_begin + tile_first, rows, item.head);
  }

  KOKKOS_INLINE_FUNCTION float* aligned_scratch(const Member& member) const {
    void* base = member.team_scratch(scratch_level).get_shmem(layout.bytes());
    const auto address = reinterpret_cast<std::uintptr_t>(base);
    return reinterpret_cast<float*>((address + 63u) & ~static_cast<std::uintptr_t>(63u));
  }

  // qt[d][r] = q[token r][head][d] * q_multiplier; rows past the tile end are 0.
  KOKKOS_INLINE_FUNCTION void stage_queries(const Member& member, float* qt, int token, int rows, int head) const {
    const int dqk = layout.dqk;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kBr), [&](int r) {
      if (r < rows) {
        for (int d = 0; d < dqk; ++d) qt[d * kBr + r] = Element<kIn>::load(q(token + r, head, d)) * q_multiplier;
      } else {
        for (int d = 0; d < dqk; ++d) qt[d * kBr + r] = 0.0f;
      }
    });
  }

  // kr[j][d] and vr[j][c] in fp32; key rows up to the register block are 0
  // so the score product reads finite values there.
  KOKKOS_INLINE_FUNCTION void stage_keys_values(const Member& member, float* scratch, int token, int cols,
                                                int head) const {
    float* kr = scratch + layout.kr;
    float* vr = scratch + layout.vr;
    const int dqk = layout.dqk;
    const int dv = layout.dv;
    const int dv_padded = layout.dv_padded;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, round_up(cols, kRb)), [&](int j) {
      float* k_row = kr + j * dqk;
      if (j < cols) {
        for (int d = 0; d < dqk; ++d) k_row[d] = Element<kIn>::load(k(token + j, head, d));
        float* v_row = vr + j * dv_padded;
        for (int c = 0; c < dv; ++c) v_row[c] = Element<kIn>::load(v(token + j, head, c));
        for (int c = dv; c < dv_padded; ++c) v_row[c] = 0.0f;
      } else {
        for (int d = 0; d < dqk; ++d) k_row[d] = 0.0f;
      }
    });
  }

  // Query columns of S^T that are computed: every row the value product
  // reads (rows rounded up to kRb), rounded up to whole kNc blocks. Padded
  // queries have zero q, so their scores stay finite.
  KOKKOS_INLINE_FUNCTION static int score_query_blocks(int rows) { return round_up(round_up(rows, kRb), kNc) / kNc; }

  // st[j][r] = sum_d kr[j][d] * qt[d][r]: register blocks of kRb keys x kNc
  // queries. The block index runs over keys fastest, so one kNc-wide column
  // slice of qt (dqk x kNc floats) is reused from L1 by every key block.
  KOKKOS_INLINE_FUNCTION void scores(const Member& member, float* scratch, int rows, int cols) const {
    const float* kr = scratch + layout.kr;
    const float* qt = scratch + layout.qt;
    float* st = scratch + layout.st;
    const int dqk = layout.dqk;
    const int key_blocks = round_up(cols, kRb) / kRb;
    const int query_blocks = score_query_blocks(rows);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, key_blocks * query_blocks), [&](int block) {
      const int j = (block % key_blocks) * kRb;
      const int r = (block / key_blocks) * kNc;
      Hot::template micro_gemm<kRb, kNc>(kr + j * dqk, dqk, 1, qt + r, kBr, dqk, st + j * kBr + r, kBr, nullptr);
    });
  }

  // Online softmax over this tile's keys (softmax_block_body): P^T in st, the
  // new running max/sum, and row_alpha = exp2(old max - new max).
  KOKKOS_INLINE_FUNCTION void softmax_update(const Member& member, float* scratch, int rows, int cols, bool masked,
                                             int shift) const {
    float* st = scratch + layout.st;
    float* row_max = scratch + layout.row_max;
    float* row_sum = scratch + layout.row_sum;
    float* row_alpha = scratch + layout.row_alpha;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, score_query_blocks(rows)), [&](int block) {
      Hot::template softmax_block<kBr, kNc>(st, row_max, row_sum, row_alpha, block * kNc, cols, masked, shift);
    });
  }

  // acc[r][:] = acc[r][:] * row_alpha[r] + sum_j st[j][r] * vr[j][:].
  KOKKOS_INLINE_FUNCTION void accumulate_values(const Member& member, float* scratch, int rows, int cols) const {
    const float* st = scratch + layout.st;
    const float* vr = scratch + layout.vr;
    const float* row_alpha = scratch + layout.row_alpha;
    float* acc = scratch + layout.acc;
    const int dv_padded = layout.dv_padded;
    const int query_blocks = round_up(rows, kRb) / kRb;
    const int value_blocks = dv_padded / kNc;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, query_blocks * value_blocks), [&](int block) {
      const int r = (block % query_blocks) * kRb;
      const int c = (block / query_blocks) * kNc;
      Hot::template micro_gemm<kRb, kNc>(st + r, 1, kBr, vr + c, dv_padded, cols, acc + r * dv_padded + c, dv_padded,
                                         row_alpha + r);
    });
  }

  KOKKOS_INLINE_FUNCTION void store_output(const Member& member, float* scratch, int token, int rows, int head) const {
    const float* acc = scratch + layout.acc;
    const float* row_max = scratch + layout.row_max;
    const float* row_sum = scratch + layout.row_sum;
    const int dv = layout.dv;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(member, rows), [&](int r) {
      const float sum = row_sum[r];
      // No visible key: output 0 and LSE -inf (docs/contract.md §2).
      const float inverse = sum > 0.0f ? out_multiplier / sum : 0.0f;
      for (int c = 0; c < dv; ++c)
        out(token + r, head, c) = Element<kOut>::store(acc[r * layout.dv_padded + c] * inverse);
      if (write_lse) {
        lse(head, token + r) = sum > 0.0f ? (row_max[r] + kmath::log2(sum)) * kLn2 : neg_infinity();
      }
    });
  }
};

// The work list. Items are grouped by (sequence, head), longest group first,
// and within a group ordered by the number of keys they visit, most first.
// Strict longest-first across heads would interleave the heads, so every
// item would stream its head's K/V from memory; grouped, consecutive items
// reread one head's K/V from cache. The list still ends on the shortest
// items of the shortest sequences, which is what dynamic scheduling needs
// to finish without a long straggler.
WorkList build_work_list(const AttentionProblem& problem, int heads, int rows_q) {
  const auto& cu_q = *problem.cu_q;
  const auto& cu_k = *problem.cu_k;
  struct Costed {
    std::int64_t group_keys;  // keys of the group's longest item
    std::int64_t keys;
    WorkItem item;
  };
  std::vector<Costed> items;
  for (int b = 0; b + 1 < static_cast<int>(cu_q.size()); ++b) {
    const int sq = cu_q[b + 1] - cu_q[b];
    const int sk = cu_k[b + 1] - cu_k[b];
    auto keys_of = [&](int tile) -> std::int64_t {
      const int last = std::min(sq, (tile + 1) * rows_q) - 1;
      return numeric::causal_key_end(last, sq, sk, problem.causal);
    };
    const int tiles = (sq + rows_q - 1) / rows_q;
    if (tiles == 0) continue;
    const std::int64_t group_keys = keys_of(tiles - 1);
    for (int h = 0; h < heads; ++h) {
      for (int tile = tiles - 1; tile >= 0; --tile) items.push_back({group_keys, keys_of(tile), {b, tile, h}});
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const Costed& a, const Costed& b) {
    if (a.group_keys != b.group_keys) return a.group_keys > b.group_keys;
    if (a.item.sequence != b.item.sequence) return a.item.sequence < b.item.sequence;
    if (a.item.head != b.item.head) return a.item.head < b.item.head;
    return a.keys > b.keys;
  });
  WorkList work(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("mla_kokkos_work")), items.size());
  auto host = Kokkos::create_mirror_view(work);
  for (std::size_t i = 0; i < items.size(); ++i) host(i) = items[i].item;
  Kokkos::deep_copy(work, host);
  return work;
}

Kokkos::View<const std::int32_t*, MemSpace> to_device(const std::vector<std::int32_t>& values, const char* label) {
  Kokkos::View<std::int32_t*, MemSpace> view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                                             values.size());
  Kokkos::deep_copy(view, CuSeqlens(values.data(), values.size()));
  return view;
}

template <DType kIn, DType kOut, HostIsa kIsa>
void launch(const AttentionProblem& problem) {
  using Kernel = FlashKernel<kIn, kOut, kIsa>;
  using In = typename Element<kIn>::Storage;
  const int heads = static_cast<int>(problem.q.shape[1]);
  Kernel kernel{
      wrap<const In, 3>(problem.q),
      wrap<const In, 3>(problem.k),
      wrap<const In, 3>(problem.v),
      wrap<typename Element<kOut>::Storage, 3>(problem.out),
      {},
      !problem.lse.empty_view(),
      to_device(*problem.cu_q, "mla_kokkos_cu_q"),
      to_device(*problem.cu_k, "mla_kokkos_cu_k"),
      build_work_list(problem, heads, Kernel::kBr),
      ScratchLayout(static_cast<int>(problem.q.shape[2]), static_cast<int>(problem.v.shape[2]), Kernel::kTile)};
  if (kernel.write_lse) kernel.lse = wrap<float, 2>(problem.lse);
  kernel.causal = problem.causal;
  kernel.q_multiplier = problem.scale * numeric::log2e;
  kernel.out_multiplier = problem.out_scale ? 1.0f / *problem.out_scale : 1.0f;
  const int items = static_cast<int>(kernel.work.extent(0));
  if (items == 0) return;

  // One thread per team: on a CPU a team's work is vectorised inside each
  // thread, and a team of one needs no barrier; the TeamThreadRange loops
  // still spread work when a space runs larger teams.
  Policy policy(items, 1);
  const std::size_t bytes = kernel.layout.bytes();
  // Level 0 is the fast per-team scratch (GPU shared memory); a host space
  // caps it (Serial: 32 KiB), so larger tiles go to level 1.
  kernel.scratch_level = bytes <= static_cast<std::size_t>(policy.scratch_size_max(0)) ? 0 : 1;
  if (bytes > static_cast<std::size_t>(policy.scratch_size_max(1))) {
    raise(ErrorCategory::not_supported, "KOKKOS: head dims need " + std::to_string(bytes) +
                                            " bytes of team scratch, more than this execution space offers");
  }
  policy.set_scratch_size(kernel.scratch_level, Kokkos::PerTeam(static_cast<int>(bytes)));
  Kokkos::parallel_for("mla_kokkos_flash_attention", policy, kernel);
  Kokkos::fence();
}

template <DType kIn, HostIsa kIsa>
void launch_for_output(const AttentionProblem& problem) {
  if (problem.out.dtype == DType::float8_e4m3) {
    launch<kIn, DType::float8_e4m3, kIsa>(problem);
  } else {
    launch<kIn, kIn, kIsa>(problem);
  }
}

template <DType kIn>
void launch_for_input(const AttentionProblem& problem) {
#if MLA_KOKKOS_ISA_DISPATCH
  switch (selected_host_isa()) {
    case HostIsa::avx512:
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
      break;
  }
  raise(ErrorCategory::not_supported, "KOKKOS: inputs of dtype float8_e4m3 are not supported");
}

}  // namespace mla::kokkos
