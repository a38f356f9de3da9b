// The CUDA_FLASH forward kernel (the FlashAttention-2 algorithm on
// mma.sync.m16n8k16). Its launcher is in flash_launch.cuh; the GPU
// emulator (tests/support/simt) compiles this same header with a host compiler,
// so it names no vendor runtime header: the device builtins come through
// sm80_primitives.cuh.
//
// One thread block per (work item, head); a work item is one query tile of
// one sequence, heaviest first, and heads come in L2-sized groups
// (gpu::head_tile). With split-KV, num_splits neighbouring blocks per (work
// item, head), each over one range of its key tiles, writing float32
// partials that a merge kernel joins. Each warp owns 16 query rows. Per key tile, between two
// barriers (K landed; V landed):
//   S = Q K^T   (mma; Q as A fragments, K by ldmatrix from swizzled smem)
//   online softmax in registers, in the log2 domain (unmasked tiles: scale
//   and max folded into one FMA before ex2.approx.ftz)
//   O += P V    (mma; P re-packed from S's accumulators, V by ldmatrix.trans)
// while the next K and V tiles stream into the other shared-memory stage by
// cp.async. The epilogue divides by the row sum and writes out (q's dtype or
// fp8 e4m3) and the natural-log LSE.
//
// With float8_e4m3 inputs (In = __nv_fp8_e4m3, sm_89 and sm_120+; T is then
// the output type) both products are mma.sync m16n8k32 on e4m3 bytes, the tiles
// are the same bytes per row as a 16-bit tile of half the dims, and:
//   - q's and k's descales fold into the softmax scale, v's into the epilogue;
//   - P is kept 2^8 larger (exp2 of the score minus max - 8, at most 256 and
//     far from e4m3's 448) so that weights down to 2^-17 of the row's largest
//     survive the rounding to e4m3; the row sum carries the same factor and
//     the LSE takes it out;
//   - 8-bit operands cannot be transposed by ldmatrix, so each key step's
//     keys are permuted alike in P and V instead: P's A fragment takes S's
//     accumulators as they lie (keys 2t, 2t+1, 2t+8, 2t+9 of a thread's
//     quad), and V's B fragment is the same keys, picked out of
//     ldmatrix.trans's 16-bit pairs with two byte permutes; the pairs also
//     interleave the output columns, which the epilogue undoes.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/softmax.hpp"
#include "cuda_hip/work_schedule.hpp"
#include "flash_config.hpp"
#include "fragment_layout.hpp"
#include "mla/detail/numeric.hpp"
#include "sm80_primitives.cuh"

namespace mla::cuda_flash {

using gpu::FlashParams;

namespace detail {

// cp.async of a [Rows, RowChunks 16-byte chunks] tile whose row r starts at
// src + r * row_bytes into a swizzled shared tile of Pitch chunks per row;
// rows >= valid_rows become zeros.
//
// A row's chunks are cut into segments of a power-of-two width W that
// divides the thread count (192 dims: 16 + 8 chunks). Within a segment each
// thread keeps one chunk column and walks down the rows, so its addresses
// advance by compile-time steps: no per-chunk address registers live across
// the main loop. Consecutive threads still read consecutive 16-byte chunks.
template <int Rows, int RowChunks, int Pitch, int Threads, int Begin>
__device__ inline void load_segments(std::uint32_t dst, const unsigned char* src, std::int64_t row_bytes,
                                     int valid_rows, int tid) {
  if constexpr (Begin < RowChunks) {
    constexpr int width = segment_width(RowChunks - Begin, Threads);
    constexpr int rows_per_pass = Threads / width;
    static_assert(width > 0 && Rows % rows_per_pass == 0, "the tile must split into whole passes");
    const int chunk = Begin + tid % width;
    const int first_row = tid / width;
    const unsigned char* from = src + first_row * row_bytes + chunk * 16;
#pragma unroll
    for (int pass = 0; pass < Rows / rows_per_pass; ++pass) {
      const int row = first_row + pass * rows_per_pass;
      const bool valid = row < valid_rows;
      // An invalid row reads nothing; point it at the tile's first row anyway.
      const unsigned char* row_src = valid ? from + pass * rows_per_pass * row_bytes : src;
      sm80::cp_async_16(dst + layout::tile_offset(row, chunk, Pitch), row_src, valid);
    }
    load_segments<Rows, RowChunks, Pitch, Threads, Begin + width>(dst, src, row_bytes, valid_rows, tid);
  }
}

// A [Rows, Dim] tile of T with rows `row_stride` elements apart.
template <int Rows, int Dim, int Threads, class T>
__device__ inline void load_tile(std::uint32_t dst, const T* src, std::int64_t row_stride, int valid_rows, int tid) {
  constexpr int chunks = Dim * static_cast<int>(sizeof(T)) / 16;
  load_segments<Rows, chunks, layout::pitch_chunks(chunks), Threads, 0>(
      dst, reinterpret_cast<const unsigned char*>(src), row_stride * static_cast<std::int64_t>(sizeof(T)), valid_rows,
      tid);
}

// Which keys a tile's softmax drops: none (a tile every row sees whole),
// those past each row's causal end (the diagonal, the sequence's last keys),
// or those a key mask hides (docs/contract.md §12: `keep` holds each row's
// seen keys, 32 to a word, causality included).
enum class TileMask { none, causal, keys };

// One key tile's online softmax on this thread's rows g and g + 8 (r), in
// place: S becomes P = exp2(S * scale_log2 - max). A masked tile scales
// first and drops the keys its mask hides. An unmasked tile, most of them, takes the row extreme of the raw
// scores (the max, or the min for a negative scale) and folds the scale and
// the base into one FMA per weight. ex2.approx.ftz: weights below 2^-126 are
// 0, which no output can tell apart. P comes out 2^POffset larger (the e4m3
// path's headroom). Returns the factor O must be multiplied by before this
// tile's P V adds to it.
template <TileMask Mask, int STiles, int BlockCols, int POffset>
__device__ inline void online_softmax(float (&s)[STiles][4], float (&row_max)[2], float (&row_sum)[2],
                                      float (&rescale)[2], float scale_log2, int kt, const int (&key_end)[2],
                                      const std::uint32_t (&keep)[2][BlockCols / 32], int lane) {
  constexpr bool Masked = Mask != TileMask::none;
  float tile_max[2];
  if constexpr (Masked) {
#pragma unroll
    for (int j = 0; j < STiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        bool hidden;
        if constexpr (Mask == TileMask::keys) {
          // Keys 8j..8j+7 of the tile are bits 8 (j % 4).. of word j / 4.
          hidden = ((keep[e / 2][j / 4] >> ((j % 4) * 8 + layout::acc_col(lane, e))) & 1u) == 0;
        } else {
          hidden = kt * BlockCols + j * 8 + layout::acc_col(lane, e) >= key_end[e / 2];
        }
        s[j][e] = hidden ? -INFINITY : s[j][e] * scale_log2;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = -INFINITY;
#pragma unroll
      for (int j = 0; j < STiles; ++j) m = fmaxf(m, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      tile_max[r] = sm80::quad_max(m);
    }
  } else if (scale_log2 >= 0.0f) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = -INFINITY;
#pragma unroll
      for (int j = 0; j < STiles; ++j) m = fmaxf(m, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      tile_max[r] = sm80::quad_max(m) * scale_log2;
    }
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = INFINITY;
#pragma unroll
      for (int j = 0; j < STiles; ++j) m = fminf(m, fminf(s[j][2 * r], s[j][2 * r + 1]));
      tile_max[r] = -sm80::quad_max(-m) * scale_log2;
    }
  }
  // Masked tiles hold scaled scores already: multiply by 1.
  const float factor = Masked ? 1.0f : scale_log2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float new_max = fmaxf(row_max[r], tile_max[r]);
    const float base = gpu::exp2_base(new_max);
    rescale[r] = gpu::rescale_factor(row_max[r], base);
    row_max[r] = new_max;
    const float shift = POffset == 0 ? -base : static_cast<float>(POffset) - base;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < STiles; ++j) {
      s[j][2 * r] = sm80::exp2_ftz(fmaf(s[j][2 * r], factor, shift));
      s[j][2 * r + 1] = sm80::exp2_ftz(fmaf(s[j][2 * r + 1], factor, shift));
      sum += s[j][2 * r] + s[j][2 * r + 1];
    }
    row_sum[r] = row_sum[r] * rescale[r] + sum;
  }
}

}  // namespace detail

template <class T, int HeadDimQk, int HeadDimV, bool Causal, class In = T>
__global__ void __launch_bounds__(FlashTile<HeadDimQk, HeadDimV>::value.threads(), 1)
    flash_forward_kernel(const FlashParams p) {
  constexpr bool e4m3 = std::is_same_v<In, __nv_fp8_e4m3>;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 890 || (__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200))
  // The e4m3 mma is native on sm_89 and sm_120+ only: none before sm_89, and
  // ptxas lowers it on sm_90-sm_11x at the cost of spills. The chooser never
  // picks this kernel there (capability.hpp); the body is the trap alone.
  if constexpr (e4m3) {
    __trap();
    return;
  }
#endif
  constexpr FlashTileConfig cfg = FlashTile<HeadDimQk, HeadDimV>::value;
  constexpr int block_rows = cfg.block_rows;
  constexpr int block_cols = cfg.block_cols;
  constexpr int threads = cfg.threads();
  constexpr int in_bytes = static_cast<int>(sizeof(In));
  constexpr int qk_chunks = HeadDimQk * in_bytes / 16;  // 16-byte chunks per row
  constexpr int v_chunks = HeadDimV * in_bytes / 16;
  constexpr int mma_k = e4m3 ? 32 : 16;         // k of one mma: 32 bytes either way
  constexpr int s_tiles = block_cols / 8;       // n-tiles of S per warp
  constexpr int o_tiles = HeadDimV / 8;         // n-tiles of O per warp
  constexpr int qk_steps = HeadDimQk / mma_k;   // k-steps of S = Q K^T
  constexpr int pv_steps = block_cols / mma_k;  // k-steps of O += P V
  constexpr int q_fragments = cfg.q_in_registers ? qk_steps : 1;
  // e4m3's P is 2^8 larger than exp2(s - max) (see the top of this file).
  constexpr int p_offset = e4m3 ? 8 : 0;
  static_assert(block_cols % mma_k == 0, "whole key steps per tile");
  static_assert(in_bytes == 2 || e4m3, "fp16, bf16 or e4m3 inputs");
  const gpu::TileShape tile{block_rows, block_cols};

  extern __shared__ __align__(128) unsigned char shared[];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / warp_threads;
  const int lane = tid % warp_threads;

  // Split-KV: the key splits of one (work item, head) are neighbours.
  const auto splits = static_cast<unsigned>(p.num_splits);
  const int split = static_cast<int>(blockIdx.x % splits);
  const gpu::HeadTile task =
      gpu::head_tile(static_cast<int>(blockIdx.x / splits), p.num_work, p.num_heads, p.head_group);
  const int head = task.head;
  const gpu::WorkItem item = gpu::work_item(p.work, p.tiles_per_seq, task.work);
  const int q_start = p.cu_seqlens_q[item.seq];
  const int seqlen_q = p.cu_seqlens_q[item.seq + 1] - q_start;
  // Only without a work list: a tile past the sequence's end (uniform per block, before any barrier).
  if (item.q_tile * block_rows >= seqlen_q) return;
  const int k_start = p.cu_seqlens_k[item.seq];
  const int seqlen_k = p.cu_seqlens_k[item.seq + 1] - k_start;
  const int row0 = item.q_tile * block_rows;
  const int rows = min(block_rows, seqlen_q - row0);
  // §12: the key mask of this sequence (none: every key passes). A window
  // starts the block's key loop at the tile of its first row's first key.
  const gpu::SequenceMask mask = gpu::sequence_mask(p.mask, item.seq);
  const bool key_masked = p.mask.masks_keys();
  const int all_tiles = gpu::key_tiles(item.q_tile, seqlen_q, seqlen_k, Causal, tile);
  const int window_tile = mask.first_key_tile(row0, all_tiles, block_cols);
  // This block's key tiles: [first_tile, end_tile), all of them without a split.
  const gpu::KeyTileRange range = gpu::split_key_tiles(all_tiles - window_tile, split, p.num_splits);
  int first_tile = window_tile + range.begin;
  const int end_tile = window_tile + range.end;
  const int unmasked_tiles = gpu::unmasked_key_tiles(item.q_tile, seqlen_q, seqlen_k, Causal, tile);
  // With top-k bits, the first tile from `t` on that some row of the block
  // sees (end_tile: none). Every thread checks its share of the rows; one
  // barrier per tile looked at, so the block agrees on where to go.
  const auto next_seen_tile = [&](int t) {
    if (mask.words == nullptr) return t;
    for (; t < end_tile; ++t) {
      bool seen = false;
      for (int r = tid; r < rows && !seen; r += threads) {
        const int key_end = numeric::causal_key_end(row0 + r, seqlen_q, seqlen_k, Causal);
#pragma unroll
        for (int c = 0; c < block_cols / 32; ++c) {
          seen = seen || mask.seen(row0 + r, t * block_cols + 32 * c, key_end) != 0;
        }
      }
      if (__syncthreads_or(seen)) break;
    }
    return t;
  };
  first_tile = next_seen_tile(first_tile);
  // e4m3: q's and k's descales scale every score of the head, v's its output.
  float scale_log2 = p.scale_log2;
  float v_descale = 1.0f;
  if constexpr (e4m3) {
    scale_log2 *= p.q_descale.at(head) * p.k_descale.at(head);
    v_descale = p.v_descale.at(head);
  }

  const In* q = static_cast<const In*>(p.q) + static_cast<std::int64_t>(q_start + row0) * p.q_row_stride +
                static_cast<std::int64_t>(head) * p.q_head_stride;
  const In* k = static_cast<const In*>(p.k) + static_cast<std::int64_t>(k_start) * p.k_row_stride +
                static_cast<std::int64_t>(head) * p.k_head_stride;
  const In* v = static_cast<const In*>(p.v) + static_cast<std::int64_t>(k_start) * p.v_row_stride +
                static_cast<std::int64_t>(head) * p.v_head_stride;

  // The tiles of e4m3 inputs take fewer bytes than the 16-bit ones the
  // config sizes the stages for; they use the start of each.
  const std::uint32_t smem = sm80::shared_address(shared);
  const std::uint32_t q_smem = smem + static_cast<std::uint32_t>(cfg.q_offset());
  const auto k_smem = [&](int stage) { return smem + static_cast<std::uint32_t>(stage * cfg.stage_bytes()); };
  const auto v_smem = [&](int stage) {
    return smem + static_cast<std::uint32_t>(stage * cfg.stage_bytes() + cfg.k_tile_bytes());
  };

  // Prologue: Q, then the first key tile into stage 0, as three commit groups.
  detail::load_tile<block_rows, HeadDimQk, threads>(q_smem, q, p.q_row_stride, rows, tid);
  sm80::cp_async_commit();
  if (first_tile < end_tile) {
    const int first = first_tile * block_cols;
    detail::load_tile<block_cols, HeadDimQk, threads>(k_smem(0), k + first * p.k_row_stride, p.k_row_stride,
                                                      seqlen_k - first, tid);
    sm80::cp_async_commit();
    detail::load_tile<block_cols, HeadDimV, threads>(v_smem(0), v + first * p.v_row_stride, p.v_row_stride,
                                                     seqlen_k - first, tid);
    sm80::cp_async_commit();
  }

  // ldmatrix addresses: a per-lane row start plus, per k-step or n-pair, a
  // compile-time group offset and one of 4 per-lane swizzled chunk offsets
  // (fragment_layout.hpp). Keeping the lane parts in 8 registers instead of
  // one address per (step, tile) is what keeps the kernel free of spills.
  const int warp_row = warp * rows_per_warp;
  constexpr std::uint32_t qk_row_bytes = layout::pitch_chunks(qk_chunks) * 16;
  constexpr std::uint32_t v_row_bytes = layout::pitch_chunks(v_chunks) * 16;
  std::uint32_t a_cols[4];  // Q (A operand) and V (.trans B operand): parity lane / 16
  std::uint32_t k_cols[4];  // K (B operand): parity (lane / 8) % 2
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a_cols[i] = layout::lane_step_offset(lane, layout::a_parity(lane), i);
    k_cols[i] = layout::lane_step_offset(lane, layout::k_parity(lane), i);
  }
  static_assert(layout::a_parity(17) == layout::v_parity(17) && layout::a_parity(3) == layout::v_parity(3),
                "Q and V share their chunk offsets");
  const std::uint32_t q_lane = q_smem + static_cast<std::uint32_t>(warp_row + layout::a_row(lane)) * qk_row_bytes;
  const std::uint32_t k_lane = static_cast<std::uint32_t>(layout::k_key(lane)) * qk_row_bytes;
  // e4m3: lane l addresses key l of the step (ldmatrix matrix l / 8, row l % 8).
  const std::uint32_t v_lane = static_cast<std::uint32_t>(e4m3 ? lane : layout::v_key(lane)) * v_row_bytes;
  std::uint32_t q_frag[q_fragments][4];
  if constexpr (cfg.q_in_registers) {
    if (first_tile < end_tile) {
      sm80::cp_async_wait<2>();  // Q landed; the first K and V may still be in flight
    } else {
      sm80::cp_async_wait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < qk_steps; ++ks) {
      sm80::ldmatrix_x4(q_frag[ks], q_lane + layout::step_group_offset(ks) + a_cols[ks % 4]);
    }
    // Q's space is stage 1, first refilled after the first key tile's barrier,
    // which every warp reaches only once it has its fragments.
  }

  float o[o_tiles][4];
#pragma unroll
  for (int n = 0; n < o_tiles; ++n) {
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  }
  // Per thread: rows g and g + 8 of the warp's 16 (index r below).
  float row_max[2] = {-INFINITY, -INFINITY};  // log2 domain
  float row_sum[2] = {0.0f, 0.0f};            // this thread's columns only until the epilogue
  const int my_row = row0 + warp_row + layout::acc_row(lane, 0);
  const int key_end[2] = {numeric::causal_key_end(my_row, seqlen_q, seqlen_k, Causal),
                          numeric::causal_key_end(my_row + 8, seqlen_q, seqlen_k, Causal)};
  const sm80::Pack2<T> pack{};
  const auto pack_e4m3 = [](float a, float b, float c, float d) { return sm80::pack_e4m3x4(a, b, c, d); };

  for (int kt = first_tile, stage = 0, next_tile = 0; kt < end_tile; kt = next_tile, stage ^= 1) {
    sm80::cp_async_wait<1>();  // in flight: V(kt)
    // K(kt) is visible to every warp, and every warp is done with the other
    // stage (the previous tile, or Q's space), so it may be refilled.
    __syncthreads();
    next_tile = next_seen_tile(kt + 1);
    const bool prefetch = next_tile < end_tile;
    if (prefetch) {
      const int next = next_tile * block_cols;
      detail::load_tile<block_cols, HeadDimQk, threads>(k_smem(stage ^ 1), k + next * p.k_row_stride, p.k_row_stride,
                                                        seqlen_k - next, tid);
      sm80::cp_async_commit();
      detail::load_tile<block_cols, HeadDimV, threads>(v_smem(stage ^ 1), v + next * p.v_row_stride, p.v_row_stride,
                                                       seqlen_k - next, tid);
      sm80::cp_async_commit();
    }

    // S = Q K^T for the warp's 16 rows and the tile's block_cols keys. A
    // k-step is 32 bytes of a row for either element size, so both take the
    // same ldmatrix addresses.
    float s[s_tiles][4];
#pragma unroll
    for (int j = 0; j < s_tiles; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < qk_steps; ++ks) {
      std::uint32_t a[4];
      if constexpr (cfg.q_in_registers) {
        a[0] = q_frag[ks][0];
        a[1] = q_frag[ks][1];
        a[2] = q_frag[ks][2];
        a[3] = q_frag[ks][3];
      } else {
        sm80::ldmatrix_x4(a, q_lane + layout::step_group_offset(ks) + a_cols[ks % 4]);
      }
      const std::uint32_t k_step = k_smem(stage) + k_lane + layout::step_group_offset(ks) + k_cols[ks % 4];
#pragma unroll
      for (int np = 0; np < s_tiles / 2; ++np) {
        std::uint32_t b[4];
        sm80::ldmatrix_x4(b, k_step + np * 16 * qk_row_bytes);
        if constexpr (e4m3) {
          sm80::mma_16832_e4m3(s[2 * np], a, b[0], b[1]);
          sm80::mma_16832_e4m3(s[2 * np + 1], a, b[2], b[3]);
        } else {
          sm80::mma_16816<T>(s[2 * np], a, b[0], b[1]);
          sm80::mma_16816<T>(s[2 * np + 1], a, b[2], b[3]);
        }
      }
    }

    // Online softmax; only tiles past the unmasked ones carry the mask code,
    // and with a key mask every tile does.
    float rescale[2];
    std::uint32_t keep[2][block_cols / 32] = {};
    if (key_masked) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (my_row + 8 * r >= seqlen_q) continue;  // past the sequence: its mask row is never read
#pragma unroll
        for (int c = 0; c < block_cols / 32; ++c)
          keep[r][c] = mask.seen(my_row + 8 * r, kt * block_cols + 32 * c, key_end[r]);
      }
      detail::online_softmax<detail::TileMask::keys, s_tiles, block_cols, p_offset>(
          s, row_max, row_sum, rescale, scale_log2, kt, key_end, keep, lane);
    } else if (kt >= unmasked_tiles) {
      detail::online_softmax<detail::TileMask::causal, s_tiles, block_cols, p_offset>(
          s, row_max, row_sum, rescale, scale_log2, kt, key_end, keep, lane);
    } else {
      detail::online_softmax<detail::TileMask::none, s_tiles, block_cols, p_offset>(
          s, row_max, row_sum, rescale, scale_log2, kt, key_end, keep, lane);
    }
#pragma unroll
    for (int n = 0; n < o_tiles; ++n) {
      o[n][0] *= rescale[0];
      o[n][1] *= rescale[0];
      o[n][2] *= rescale[1];
      o[n][3] *= rescale[1];
    }

    if (prefetch) {
      sm80::cp_async_wait<2>();  // in flight: K(kt+1), V(kt+1)
    } else {
      sm80::cp_async_wait<0>();
    }
    __syncthreads();  // V(kt) is visible to every warp

    // O += P V; P goes from S's accumulators to A fragments without smem.
    const std::uint32_t v_tile = v_smem(stage) + v_lane;
#pragma unroll
    for (int ks = 0; ks < pv_steps; ++ks) {
      std::uint32_t a[4];
      if constexpr (e4m3) {
        layout::p_fragment_e4m3(a, s, ks, pack_e4m3);
#pragma unroll
        for (int c = 0; c < v_chunks; ++c) {
          // Keys 32 ks + lane; chunk c swizzled by the row's low bits (lane % 8).
          const std::uint32_t chunk = static_cast<std::uint32_t>((c / 8) * 128 + (((c % 8) ^ (lane % 8)) * 16));
          std::uint32_t r[4];
          sm80::ldmatrix_x4_trans(r, v_tile + ks * 32 * v_row_bytes + chunk);
          sm80::mma_16832_e4m3(o[2 * c], a, sm80::byte_perm(r[0], r[1], layout::v_even_bytes),
                               sm80::byte_perm(r[2], r[3], layout::v_even_bytes));
          sm80::mma_16832_e4m3(o[2 * c + 1], a, sm80::byte_perm(r[0], r[1], layout::v_odd_bytes),
                               sm80::byte_perm(r[2], r[3], layout::v_odd_bytes));
        }
      } else {
        layout::p_fragment(a, s, ks, pack);
#pragma unroll
        for (int np = 0; np < o_tiles / 2; ++np) {
          std::uint32_t b[4];
          sm80::ldmatrix_x4_trans(b, v_tile + ks * 16 * v_row_bytes + layout::step_group_offset(np) + a_cols[np % 4]);
          sm80::mma_16816<T>(o[2 * np], a, b[0], b[1]);
          sm80::mma_16816<T>(o[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
  }
  // Nothing may still be landing in shared memory when the block exits (the
  // Q copy of a block without keys is never waited for above).
  sm80::cp_async_wait<0>();

  // Epilogue: full row sums, 1/sum, natural-log LSE; rows without keys get 0 and -inf.
  // A device-held fp8 scale is read once, when the kernel runs (graph replays
  // see updates); the host then passes out_scale 1, so the product is exact.
  // (Selecting between the pointer and &p.out_scale would let the compiler
  // copy the kernel arguments to local memory.)
  const float out_scale = p.out_scale * (p.out_fp8 && p.out_scale_ptr != nullptr ? *p.out_scale_ptr : 1.0f);
  // §12: the head's sink joins each row's divisor (P's 2^p_offset too), not
  // its LSE; a split's partials leave it to the merge.
  const float sink = gpu::sink_log2(p.mask, head, splits > 1) + static_cast<float>(p_offset);
  // Output dims in adjacent pairs: pair i of a row is o[pair_tile(i)][2r +
  // pair_half(i)] and o[pair_tile(i) + odd][...] at dim pair_col(i). For
  // 16-bit inputs pair i is n-tile i; for e4m3 the even and odd mmas of chunk
  // i / 2 hold dims 4t + 2h and 4t + 2h + 1, h = i % 2.
  constexpr int pairs = o_tiles;
  const auto pair_col = [lane](int i) {
    return e4m3 ? (i / 2) * 16 + layout::e4m3_acc_dim(lane, i % 2, 0) : i * 8 + layout::acc_col(lane, 0);
  };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = sm80::quad_sum(row_sum[r]);
    const float factor = gpu::output_factor(sum, row_max[r], sink) * v_descale;
    const float lse = gpu::natural_lse(row_max[r], p_offset == 0 ? sum : sum * (1.0f / (1 << p_offset)));
    const int row = warp_row + layout::acc_row(lane, 2 * r);  // within the block
    if (row >= rows) continue;
    const auto pair = [&](int i) {
      if constexpr (e4m3) {
        const int even = 2 * (i / 2), half = i % 2;
        return gpu::FloatPair{o[even][2 * r + half] * factor, o[even + 1][2 * r + half] * factor};
      } else {
        return gpu::FloatPair{o[i][2 * r] * factor, o[i][2 * r + 1] * factor};
      }
    };
    const std::int64_t token = static_cast<std::int64_t>(q_start) + row0 + row;
    if (splits > 1) {
      // Split-KV: this key range's normalised output and LSE in float32, for the merge.
      float* partial = p.partial_out + ((static_cast<std::int64_t>(split) * p.q_tokens + token) * p.num_heads + head) *
                                           static_cast<std::int64_t>(HeadDimV);
#pragma unroll
      for (int i = 0; i < pairs; ++i) {
        *reinterpret_cast<gpu::FloatPair*>(partial + pair_col(i)) = pair(i);
      }
      if (lane % 4 == 0) {
        p.partial_lse[(static_cast<std::int64_t>(split) * p.num_heads + head) * p.q_tokens + token] = lse;
      }
      continue;
    }
    const std::int64_t out_offset = token * p.out_row_stride + static_cast<std::int64_t>(head) * p.out_head_stride;
#pragma unroll
    for (int i = 0; i < pairs; ++i) {
      const int col = pair_col(i);
      const gpu::FloatPair values = pair(i);
      if (p.out_fp8) {
        const auto bits = static_cast<std::uint16_t>(numeric::float_to_fp8_e4m3(values.lo / out_scale) |
                                                     (numeric::float_to_fp8_e4m3(values.hi / out_scale) << 8));
        *reinterpret_cast<std::uint16_t*>(static_cast<std::uint8_t*>(p.out) + out_offset + col) = bits;
      } else {
        *reinterpret_cast<std::uint32_t*>(static_cast<T*>(p.out) + out_offset + col) = pack(values.lo, values.hi);
      }
    }
    if (p.lse != nullptr && lane % 4 == 0) {
      p.lse[static_cast<std::int64_t>(head) * p.lse_head_stride + token * p.lse_token_stride] = lse;
    }
  }
}

}  // namespace mla::cuda_flash
