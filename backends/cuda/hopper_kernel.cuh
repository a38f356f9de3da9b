// The HOPPER_FLASH forward kernel: flash attention on sm_90a's warpgroup MMA
// (wgmma), tensor memory accelerator (TMA) and mbarriers. Its launcher is in
// hopper_launch.cuh; the GPU emulator (tests/support/simt) compiles this same
// header with a host compiler, so every Hopper instruction comes through
// sm90_primitives.cuh and no vendor runtime header is named here.
//
// A persistent grid over the (query tile, head) pairs, heaviest query tiles
// first within each group of heads (hopper_config.hpp, head_group): each
// block takes the next tile from a counter when its producer is ready for
// one (HopperSchedule), so the blocks that drew light tiles take more. A
// block is three warpgroups:
//   producer (warpgroup 0, one elected thread): per tile, the tile index into
//     shared memory and Q by TMA once (q_full / q_empty), then the K and V
//     tiles through a 2-stage pipeline (full / empty barriers per stage for
//     K and for V, each full barrier expecting its boxes' bytes); at the end
//     -1 into the slot;
//   consumers (warpgroups 1 and 2, 64 query rows each): per key tile
//     S = Q K^T   (wgmma m64nNk16, Q and K from 128-byte swizzled shared memory)
//     scale into the log2 domain, mask (masked tiles only), online softmax
//     O = O * rescale; O += P V (wgmma with P from registers, V MN-major)
//     releasing K once S has read it and V once P V has. The epilogue divides by the row sum and writes
//     O (q's dtype or fp8 e4m3) and the natural-log LSE straight from the
//     accumulators, predicated per row; with HopperSchedule::tma_store, O
//     goes through a staging panel in shared memory instead and leaves it
//     by TMA where a consumer's 64 rows lie inside the sequence, by
//     predicated 16-byte stores where they cross its end (a box cannot stop
//     at a sequence's end in a varlen batch).
// Key tiles run from the last to the first, so the causal diagonal tiles
// (masked) come first and the rest run without mask code; key tiles past a
// query tile's causal end are never loaded. With split-KV (num_splits > 1)
// each tile is one key range of a (query tile, head) pair, and the epilogue
// writes float32 partials that the launcher's merge folds into out and lse. Boxes may read rows of the
// neighbouring sequence: keys past seqlen_k are masked (never trusted) and
// rows past seqlen_q are never stored.
//
// With float8_e4m3 inputs (In = __nv_fp8_e4m3; T names the output) both
// products are wgmma k32 on e4m3 bytes and:
//   - Q and K come in 64-byte panels with the 64-byte swizzle;
//   - 8-bit wgmma operands are K-major only, so V is read from a transposed
//     copy ([head][dv][column], transpose_v_e4m3 below, run by the launch),
//     whose key columns are also permuted within each 32-key step the way
//     P's A fragment takes S's accumulators (e4m3_slot_key): P needs no
//     shuffle between lanes;
//   - q's and k's descales fold into the softmax scale, v's into the
//     epilogue; P is 2^8 larger than exp2(s - max) (headroom for e4m3's
//     rounding, taken out of the LSE) and rounded with saturation.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/fragment_layout.hpp"
#include "cuda/hopper_config.hpp"
#include "cuda/sm80_primitives.cuh"
#include "cuda/sm90_primitives.cuh"
#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/softmax.hpp"
#include "cuda_hip/work_schedule.hpp"
#include "mla/detail/numeric.hpp"

// Kernel parameters whose address is taken (the tensor maps) must stay in the
// constant bank: __grid_constant__ under nvcc; a host compiler has no such
// qualifier and needs none.
#if !defined(__grid_constant__)
#define __grid_constant__
#endif

namespace mla::hopper_flash {

using gpu::FlashParams;
namespace sm90 = cuda_flash::sm90;

namespace detail {

// Tile t of the schedule: heads in groups of `group`; within a group the work
// items in list order (heaviest first), each for every head of the group;
// with split-KV, the `splits` key ranges of one (work item, head) are
// neighbours.
struct TileAssignment {
  int work = 0;
  int head = 0;
  int split = 0;
};

__device__ inline TileAssignment assign(int t, int num_work, int group, int splits) {
  const int split = t % splits;
  const int u = t / splits;
  const int per_group = num_work * group;
  const int g = u / per_group;
  const int r = u - g * per_group;
  return {r / group, g * group + r % group, split};
}

// One query tile of one head (and one key range of it under split-KV), as
// both roles see it (they must agree on every bound, or the barrier phases
// drift apart). The key tiles run from last_tile down, key_tiles of them,
// the first masked_tiles of those with the mask. With docs/contract.md §12's
// key mask the range starts at the window's first tile and every tile is
// masked (the top-k bits hide keys inside any tile; no tile is skipped).
struct TileBounds {
  bool empty = true;  // past the end of its sequence: no loads, no output
  int q_start = 0;
  int seqlen_q = 0;
  int row0 = 0;
  int k_start = 0;
  int seqlen_k = 0;
  int key_tiles = 0;
  int last_tile = -1;
  int masked_tiles = 0;
  int vt_start = 0;  // e4m3: the sequence's first column of the transposed V (hopper_config.hpp)
  int seq = 0;
};

template <bool Causal>
__device__ inline TileBounds bounds(const FlashParams& p, int work, int split, int block_cols) {
  TileBounds b;
  const gpu::WorkItem item = gpu::work_item(p.work, p.tiles_per_seq, work);
  b.seq = item.seq;
  b.q_start = p.cu_seqlens_q[item.seq];
  b.seqlen_q = p.cu_seqlens_q[item.seq + 1] - b.q_start;
  b.row0 = item.q_tile * block_rows;
  if (b.row0 >= b.seqlen_q) return b;
  b.empty = false;
  b.k_start = p.cu_seqlens_k[item.seq];
  b.seqlen_k = p.cu_seqlens_k[item.seq + 1] - b.k_start;
  b.vt_start = static_cast<int>(vt_start(b.k_start, item.seq));
  const gpu::TileShape tile{block_rows, block_cols};
  const int unmasked = gpu::unmasked_key_tiles(item.q_tile, b.seqlen_q, b.seqlen_k, Causal, tile);
  const int all_tiles = gpu::key_tiles(item.q_tile, b.seqlen_q, b.seqlen_k, Causal, tile);
  const int window_tile = gpu::sequence_mask(p.mask, item.seq).first_key_tile(b.row0, all_tiles, block_cols);
  const gpu::KeyTileRange range = gpu::split_key_tiles(all_tiles - window_tile, split, p.num_splits);
  b.key_tiles = range.end - range.begin;
  b.last_tile = window_tile + range.end - 1;
  const int masked =
      window_tile + range.end - (window_tile + range.begin > unmasked ? window_tile + range.begin : unmasked);
  b.masked_tiles = p.mask.masks_keys() ? b.key_tiles : (masked > 0 ? masked : 0);
  return b;
}

// The swizzle of an input panel: 128 bytes of a 16-bit type, 64 of e4m3.
template <class In>
inline constexpr sm90::Swizzle input_swizzle = sizeof(In) == 1 ? sm90::Swizzle::bytes64 : sm90::Swizzle::bytes128;

// S = Q K^T for one consumer warpgroup's 64 rows and the stage's block_cols
// keys. Both operands K-major and swizzled over a panel row (128 bytes, or
// 64 for e4m3): a k-step (16 elements, or 32 of e4m3) is 32 bytes along the
// row, so the descriptors start 32 bytes further per step and a panel
// further per row; 8-row groups are one swizzle repeat apart (stride byte
// offset); the leading byte offset is unused by swizzled K-major operands.
template <class In, int HeadDimQk, int BlockCols>
__device__ inline void qk_gemm(float (&s)[BlockCols / 2], const unsigned char* q_rows, const unsigned char* k_tile) {
  constexpr int row_bytes = panel_elements * static_cast<int>(sizeof(In));
  constexpr int steps_per_panel = row_bytes / 32;
  constexpr std::size_t q_panel = static_cast<std::size_t>(block_rows) * row_bytes;
  constexpr std::size_t k_panel = static_cast<std::size_t>(BlockCols) * row_bytes;
  sm90::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < HeadDimQk / panel_elements * steps_per_panel; ++ks) {
    const std::size_t step = static_cast<std::size_t>(ks % steps_per_panel) * 32;
    const std::size_t panel = static_cast<std::size_t>(ks / steps_per_panel);
    const std::uint64_t a =
        sm90::make_smem_descriptor(q_rows + panel * q_panel + step, input_swizzle<In>, 16, 8 * row_bytes);
    const std::uint64_t b =
        sm90::make_smem_descriptor(k_tile + panel * k_panel + step, input_swizzle<In>, 16, 8 * row_bytes);
    sm90::wgmma_ss<In, BlockCols, false>(s, a, b, ks > 0 ? 1 : 0);
  }
  sm90::wgmma_commit_group();
}

// P as the A fragments of O += P V: the m64k16 A fragment of keys
// 16kk..16kk+15 is the D fragment of S's 8-key blocks 2kk and 2kk+1 (rows g
// and g+8, keys 2(lane%4) + {0, 1} and + 8), rounded to T.
template <class T, int BlockCols>
__device__ inline void pack_p(std::uint32_t (&p_frag)[BlockCols / 16][4], const float (&s)[BlockCols / 2]) {
  const cuda_flash::sm80::Pack2<T> pack{};
#pragma unroll
  for (int kk = 0; kk < BlockCols / 16; ++kk) {
#pragma unroll
    for (int i = 0; i < 4; ++i) p_frag[kk][i] = pack(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
  }
}

// e4m3: the m64k32 A fragment of keys 32kk..32kk+31 from S's 8-key blocks
// 4kk..4kk+3 as they lie, rounded to e4m3 with saturation: a warp's part of
// wgmma's A is the mma.m16n8k32 layout and its S accumulators those of
// m16n8 tiles, so CUDA_FLASH's layout::p_fragment_e4m3 (the permutation
// e4m3_slot_key describes) serves, over S viewed as its 8-key blocks.
template <int BlockCols>
__device__ inline void pack_p_e4m3(std::uint32_t (&p_frag)[BlockCols / 32][4], const float (&s)[BlockCols / 2]) {
  const auto& blocks = reinterpret_cast<const float(&)[BlockCols / 8][4]>(s);
  const auto pack = [](float a, float b, float c, float d) { return cuda_flash::sm80::pack_e4m3x4(a, b, c, d); };
#pragma unroll
  for (int kk = 0; kk < BlockCols / 32; ++kk) cuda_flash::layout::p_fragment_e4m3(p_frag[kk], blocks, kk, pack);
}

// O += P V: one k-step of 16 keys per wgmma, P from registers. V is
// [key][dv] in panels of 64 dv columns, which makes B (keys x dv) MN-major:
// 8-key groups 1024 bytes apart (stride byte offset), 64-column panels a
// panel apart (leading byte offset). The fragments are packed before the
// fence: a register written between two wgmmas would make ptxas serialize
// them (an injected warpgroup.arrive).
template <class T, int HeadDimV, int BlockCols>
__device__ inline void pv_gemm(float (&o)[HeadDimV / 2], const std::uint32_t (&p_frag)[BlockCols / 16][4],
                               const unsigned char* v_tile) {
  constexpr unsigned v_panel = static_cast<unsigned>(BlockCols) * panel_row_bytes;
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BlockCols / 16; ++kk) {
    const std::uint64_t b = sm90::make_smem_descriptor(v_tile + static_cast<std::size_t>(kk) * 16 * panel_row_bytes,
                                                       sm90::Swizzle::bytes128, v_panel, swizzle_atom_bytes);
    sm90::wgmma_rs<T, HeadDimV, true>(o, p_frag[kk], b, 1);
  }
  sm90::wgmma_commit_group();
}

// e4m3: O += P V with V^T in panels of 64 keys (one 64-byte swizzled row per
// dv column, K-major as 8-bit operands must be): one k-step of 32 keys per
// wgmma, 32 bytes along a row, a panel further per two steps.
template <int HeadDimV, int BlockCols>
__device__ inline void pv_gemm_e4m3(float (&o)[HeadDimV / 2], const std::uint32_t (&p_frag)[BlockCols / 32][4],
                                    const unsigned char* vt_tile) {
  constexpr int row_bytes = panel_elements;
  constexpr std::size_t vt_panel = static_cast<std::size_t>(HeadDimV) * row_bytes;
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BlockCols / 32; ++kk) {
    const std::uint64_t b = sm90::make_smem_descriptor(vt_tile + (kk / 2) * vt_panel + (kk % 2) * 32,
                                                       sm90::Swizzle::bytes64, 16, 8 * row_bytes);
    sm90::wgmma_rs<__nv_fp8_e4m3, HeadDimV, false>(o, p_frag[kk], b, 1);
  }
  sm90::wgmma_commit_group();
}

// One key tile's online softmax on S (in place: S becomes P), for this
// thread's rows g and g+8, in the log2 domain. A masked tile (the causal
// diagonal, the sequence's last keys) scales first and drops keys past each
// row's end; only masked tiles carry that code. An unmasked tile takes the
// row extreme of the raw scores (the max, or the min for a negative scale)
// and folds scale and base into one FFMA before ex2.approx.ftz, as most
// tiles are unmasked. Returns through `rescale` the factor O must be
// multiplied by before this tile's P V adds to it. P comes out 2^POffset
// larger (e4m3's headroom; the row sum carries it too). With KeyMask a
// masked tile drops the keys §12's mask hides instead.
template <bool Masked, int BlockCols, int POffset = 0, bool KeyMask = false>
__device__ inline void online_softmax(float (&s)[BlockCols / 2], float (&row_max)[2], float (&row_sum)[2],
                                      float (&rescale)[2], float scale_log2, int kt, const int (&key_end)[2],
                                      int quad_col, const FlashParams& p, const TileBounds& b, int thread_row) {
  float tile_max[2];
  if constexpr (Masked) {
    if constexpr (KeyMask) {
      // §12: the keys each row sees, 32 at a time (causality included):
      // word w covers s[16 w .. 16 w + 15]. The mask is read from the
      // kernel's parameters when a tile needs it, and only the KeyMask
      // instantiations have this code: its registers would make the others
      // spill.
      const gpu::SequenceMask mask = gpu::sequence_mask(p.mask, b.seq);
      // One row and one word at a time: the fewest registers live next to S
      // and O (more spill in this kernel).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = b.row0 + thread_row + 8 * r;
        const gpu::RowMask row_mask = mask.row_mask(row);
#pragma unroll
        for (int w = 0; w < (BlockCols + 31) / 32; ++w) {
          const std::uint32_t seen = row < b.seqlen_q ? row_mask.seen(kt * BlockCols + 32 * w, key_end[r]) : 0u;
#pragma unroll
          for (int j = 16 * w; j < 16 * w + 16 && j < BlockCols / 2; ++j) {
            if ((j / 2) % 2 != r) continue;
            const int bit = ((j / 4) * 8 + quad_col + (j % 2)) % 32;
            s[j] = ((seen >> bit) & 1u) == 0 ? -INFINITY : s[j] * scale_log2;
          }
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < BlockCols / 2; ++j) {
        const int key = kt * BlockCols + (j / 4) * 8 + quad_col + (j % 2);
        s[j] = key >= key_end[(j / 2) % 2] ? -INFINITY : s[j] * scale_log2;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = -INFINITY;
#pragma unroll
      for (int n = 0; n < BlockCols / 8; ++n) m = fmaxf(m, fmaxf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
      tile_max[r] = cuda_flash::sm80::quad_max(m);
    }
  } else if (scale_log2 >= 0.0f) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = -INFINITY;
#pragma unroll
      for (int n = 0; n < BlockCols / 8; ++n) m = fmaxf(m, fmaxf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
      tile_max[r] = cuda_flash::sm80::quad_max(m) * scale_log2;
    }
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = INFINITY;
#pragma unroll
      for (int n = 0; n < BlockCols / 8; ++n) m = fminf(m, fminf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
      tile_max[r] = -cuda_flash::sm80::quad_max(-m) * scale_log2;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float new_max = fmaxf(row_max[r], tile_max[r]);
    const float base = gpu::exp2_base(new_max);
    rescale[r] = gpu::rescale_factor(row_max[r], base);
    row_max[r] = new_max;
    // Masked tiles hold scaled scores already: multiply by 1.
    const float factor = Masked ? 1.0f : scale_log2;
    const float shift = POffset == 0 ? -base : static_cast<float>(POffset) - base;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < BlockCols / 8; ++n) {
      s[4 * n + 2 * r] = cuda_flash::sm80::exp2_ftz(fmaf(s[4 * n + 2 * r], factor, shift));
      s[4 * n + 2 * r + 1] = cuda_flash::sm80::exp2_ftz(fmaf(s[4 * n + 2 * r + 1], factor, shift));
      sum += s[4 * n + 2 * r] + s[4 * n + 2 * r + 1];
    }
    row_sum[r] = row_sum[r] * rescale[r] + sum;
  }
}

template <int HeadDimV>
__device__ inline void rescale_o(float (&o)[HeadDimV / 2], const float (&rescale)[2]) {
#pragma unroll
  for (int n = 0; n < HeadDimV / 8; ++n) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      o[4 * n + 2 * r] *= rescale[r];
      o[4 * n + 2 * r + 1] *= rescale[r];
    }
  }
}

// Where one consumer's 64 rows of O go: a box of the output's map when all
// of them lie inside their sequence, else the first `rows` of them from
// `out` on (this head's columns), `row_bytes` apart.
struct StagedRows {
  const sm90::TensorMap* map;
  int token;  // the first row's
  int head;
  int rows;  // inside the sequence: 1..rows_per_consumer
  unsigned char* out;
  std::int64_t row_bytes;
};

// 16 bytes of a row, copied as one access.
struct alignas(16) Chunk16 {
  std::uint32_t word[4];
};

// O of one consumer's 64 rows through its staging panel, 64 columns of dv
// at a time: the warpgroup writes the panel with stmatrix, 128-byte
// swizzled as the output map's box. Whole halves: each thread orders its
// generic-proxy writes before the async proxy's read (fence.proxy.async) and,
// after the warpgroup's barrier, one thread stores the box by TMA. A half
// that crosses its sequence's end (a box cannot stop there): after the
// barrier, 16-byte stores of the rows inside it, a row's 128 bytes by 8
// neighbouring threads. The panel is written again only after the issuing
// thread has seen the previous store finish reading it (wait_group.read) and
// the warpgroup has passed a barrier. Named barrier 3 + consumer (1 and 2
// are the ping-pong turns).
template <class T, int HeadDimV>
__device__ inline void store_o_staged(const float (&o)[HeadDimV / 2], const float (&factor)[2], unsigned char* panel,
                                      const StagedRows& dst, int consumer) {
  const int thread = static_cast<int>(threadIdx.x) % warpgroup_threads;
  const int lane = thread % 32;
  const bool issuer = thread == 0;
  const bool whole = dst.rows == rows_per_consumer;
  const unsigned barrier = 3u + static_cast<unsigned>(consumer);
  const cuda_flash::sm80::Pack2<T> pack{};
  // stmatrix x4 of 16 columns: lane 8m + i gives row i of matrix m, matrices
  // 0 and 1 being rows 0-7 and 8-15 of the warp's 16 in the first 8 columns,
  // 2 and 3 the same in the next 8.
  const int m = lane / 8;
  const int row = (thread / 32) * 16 + (m % 2) * 8 + lane % 8;
  const std::uint32_t panel_address = sm90::shared_address(panel);
  const std::uint32_t row_address = panel_address + static_cast<std::uint32_t>(row * panel_row_bytes);
  constexpr int chunks_per_row = panel_row_bytes / 16;
#pragma unroll
  for (int j = 0; j < HeadDimV / panel_elements; ++j) {
    if (issuer) sm90::tma_store_wait<0>();
    sm90::named_barrier_sync(barrier, warpgroup_threads);
#pragma unroll
    for (int c = 0; c < panel_elements / 16; ++c) {
      const int n = j * (panel_elements / 8) + 2 * c;  // the first 8-column block of o
      const std::uint32_t r[4] = {
          pack(o[4 * n] * factor[0], o[4 * n + 1] * factor[0]),
          pack(o[4 * n + 2] * factor[1], o[4 * n + 3] * factor[1]),
          pack(o[4 * n + 4] * factor[0], o[4 * n + 5] * factor[0]),
          pack(o[4 * n + 6] * factor[1], o[4 * n + 7] * factor[1]),
      };
      const int chunk = 2 * c + m / 2;  // 16-byte chunk of the row, before the swizzle
      sm90::stmatrix_x4(row_address + static_cast<std::uint32_t>(((chunk ^ (row % 8)) * 16)), r);
    }
    if (whole) sm90::fence_proxy_async_shared();
    sm90::named_barrier_sync(barrier, warpgroup_threads);
    if (whole) {
      if (issuer) {
        sm90::tma_store_3d(dst.map, panel, j * panel_elements, dst.token, dst.head);
        sm90::tma_store_commit_group();
      }
      continue;
    }
#pragma unroll
    for (int i = 0; i < rows_per_consumer * chunks_per_row / warpgroup_threads; ++i) {
      const int c = i * warpgroup_threads + thread;
      const int r = c / chunks_per_row;
      const int chunk = c % chunks_per_row;
      if (r >= dst.rows) continue;
      Chunk16 v;
      sm90::ld_shared_v4(v.word,
                         panel_address + static_cast<std::uint32_t>(r * panel_row_bytes + (chunk ^ (r % 8)) * 16));
      *reinterpret_cast<Chunk16*>(dst.out + r * dst.row_bytes + j * panel_row_bytes + chunk * 16) = v;
    }
  }
}

}  // namespace detail

// T: the output type, and the inputs' unless In is __nv_fp8_e4m3 (then
// v_map describes the launch's transposed copy of V; hopper_config.hpp).
// KeyMask: the launch has docs/contract.md §12's top-k mask or window.
template <class T, int HeadDimQk, int HeadDimV, bool Causal, class In = T, bool KeyMask = false>
__global__ void __launch_bounds__(block_threads, 1)
    hopper_flash_kernel(const FlashParams p, const HopperSchedule schedule,
                        const __grid_constant__ sm90::TensorMap q_map, const __grid_constant__ sm90::TensorMap k_map,
                        const __grid_constant__ sm90::TensorMap v_map, const __grid_constant__ sm90::TensorMap o_map) {
  constexpr bool e4m3 = sizeof(In) == 1;
  constexpr HopperTileConfig cfg =
      HopperTile<HeadDimQk, HeadDimV>::value.with_input_bytes(static_cast<int>(sizeof(In)));
  constexpr int block_cols = cfg.block_cols;
  constexpr int qk_panels = cfg.qk_panels();
  // 16-bit V: panels of dv columns, each block_cols keys; e4m3's V^T: panels of 64 keys, each dv rows.
  constexpr int v_panels = e4m3 ? block_cols / panel_elements : cfg.v_panels();
  constexpr std::size_t v_panel_bytes = e4m3 ? cfg.vt_panel_bytes() : cfg.kv_panel_bytes();
  // e4m3's P is 2^8 larger than exp2(s - max): at most 256, below e4m3's 448,
  // so weights down to 2^-17 of the row's largest survive its rounding; the
  // LSE takes the factor out.
  constexpr int p_offset = e4m3 ? 8 : 0;
  static_assert(sizeof(In) == 2 || std::is_same_v<In, __nv_fp8_e4m3>, "fp16, bf16 or e4m3 inputs");
  static_assert(HeadDimV <= 256 && block_cols <= 256, "one wgmma per GEMM row block");
  static_assert(HeadDimV % panel_elements == 0, "the TMA-store epilogue stages whole panels");

  extern __shared__ __align__(16) unsigned char shared[];
  // The swizzle pattern is anchored at 1024-byte boundaries: align the base
  // (the allocation has the slack) instead of trusting the runtime to place
  // dynamic shared memory on one (it promises 16 bytes).
  const std::uint32_t misalign = sm90::shared_address(shared) % swizzle_atom_bytes;
  unsigned char* const smem = shared + (misalign == 0 ? 0 : swizzle_atom_bytes - misalign);
  unsigned char* const q_smem = smem;
  const auto k_smem = [&](int stage) { return smem + cfg.stage_offset(stage); };
  const auto v_smem = [&](int stage) { return smem + cfg.stage_offset(stage) + cfg.k_bytes(); };
  auto* const bars = reinterpret_cast<std::uint64_t*>(smem + cfg.barrier_offset());
  std::uint64_t* const q_full = bars;
  std::uint64_t* const q_empty = bars + 1;
  const auto k_full = [&](int stage) { return bars + 2 + stage; };
  const auto k_empty = [&](int stage) { return bars + 2 + stages + stage; };
  const auto v_full = [&](int stage) { return bars + 2 + 2 * stages + stage; };
  const auto v_empty = [&](int stage) { return bars + 2 + 3 * stages + stage; };
  auto* const tile_slot = reinterpret_cast<volatile int*>(smem + cfg.tile_slot_offset());

  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / warpgroup_threads;
  if (tid == 0) {
    sm90::mbarrier_init(q_full, 1);
    sm90::mbarrier_init(q_empty, consumer_threads);
    for (int stage = 0; stage < stages; ++stage) {
      sm90::mbarrier_init(k_full(stage), 1);
      sm90::mbarrier_init(k_empty(stage), consumer_threads);
      sm90::mbarrier_init(v_full(stage), 1);
      sm90::mbarrier_init(v_empty(stage), consumer_threads);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  const int grid = static_cast<int>(gridDim.x);

  if (warpgroup == 0) {
    // Producer: one thread issues every copy and picks the tiles; the rest of
    // the warpgroup idles.
    sm90::setmaxnreg_decrease<producer_registers>();
    if (tid / 32 == 0 && sm90::elect_one_sync()) {
      sm90::prefetch_tensor_map(&q_map);
      sm90::prefetch_tensor_map(&k_map);
      sm90::prefetch_tensor_map(&v_map);
      int* const tile_counter = schedule.tile_counter;
      unsigned q_phase = 0;
      int it = 0;  // key tiles of earlier tiles: key tile it uses stage it % 2, phase (it / 2) % 2
      // K or V of key tile `n` (counted over the block's tiles) from key
      // `key` on: wait until the consumers gave the stage back, then the
      // boxes, completing on the full barrier.
      const auto load = [&](int n, int key, int v_column, int head, bool is_k) {
        const int stage = n % stages;
        const unsigned phase = static_cast<unsigned>(n / stages) & 1u;
        if (is_k) {
          sm90::mbarrier_wait_parity(k_empty(stage), phase ^ 1u);
          sm90::mbarrier_arrive_expect_tx(k_full(stage), static_cast<unsigned>(cfg.k_bytes()));
#pragma unroll
          for (int panel = 0; panel < qk_panels; ++panel) {
            sm90::tma_load_3d(k_smem(stage) + panel * cfg.kv_panel_bytes(), &k_map, k_full(stage),
                              panel * panel_elements, key, head);
          }
        } else {
          sm90::mbarrier_wait_parity(v_empty(stage), phase ^ 1u);
          sm90::mbarrier_arrive_expect_tx(v_full(stage), static_cast<unsigned>(cfg.v_bytes()));
#pragma unroll
          for (int panel = 0; panel < v_panels; ++panel) {
            if constexpr (e4m3) {
              // V^T: 64 key columns (from this tile's first) of every dv row.
              sm90::tma_load_3d(v_smem(stage) + panel * v_panel_bytes, &v_map, v_full(stage),
                                v_column + panel * panel_elements, 0, head);
            } else {
              sm90::tma_load_3d(v_smem(stage) + panel * v_panel_bytes, &v_map, v_full(stage), panel * panel_elements,
                                key, head);
            }
          }
        }
      };
      for (int t = static_cast<int>(blockIdx.x);;
           t = tile_counter != nullptr ? grid + sm90::atomic_add_global(tile_counter, 1) : t + grid) {
        // The consumers have read the previous slot and released Q (the first
        // wait, on a fresh barrier, passes: parity 1 is the phase before the
        // first).
        if (t >= schedule.total_tiles) {
          sm90::mbarrier_wait_parity(q_empty, q_phase ^ 1u);
          *tile_slot = -1;  // published by the arrive (release), read after the consumers' wait (acquire)
          sm90::mbarrier_arrive(q_full);
          break;
        }
        const detail::TileAssignment a = detail::assign(t, p.num_work, schedule.head_group, p.num_splits);
        const detail::TileBounds b = detail::bounds<Causal>(p, a.work, a.split, block_cols);
        if (b.empty) continue;
        sm90::mbarrier_wait_parity(q_empty, q_phase ^ 1u);
        *tile_slot = t;
        sm90::mbarrier_arrive_expect_tx(q_full, static_cast<unsigned>(cfg.q_bytes()));
#pragma unroll
        for (int panel = 0; panel < qk_panels; ++panel) {
          sm90::tma_load_3d(q_smem + panel * cfg.q_panel_bytes(), &q_map, q_full, panel * panel_elements,
                            b.q_start + b.row0, a.head);
        }
        q_phase ^= 1u;
        // In the order the consumers need them: K_0, then K_i before V_{i-1}
        // (their step i reads K_i, then V_{i-1}), then the last V. Key tile i
        // starts at key (last_tile - i) * block_cols.
        // e4m3: the tile's first column of the transposed V (hopper_config.hpp, vt_start).
        const auto key_of = [&](int i) { return b.k_start + (b.last_tile - i) * block_cols; };
        const auto column_of = [&](int i) { return b.vt_start + (b.last_tile - i) * block_cols; };
        for (int i = 0; i < b.key_tiles; ++i) {
          load(it + i, key_of(i), column_of(i), a.head, true);
          if (i > 0) load(it + i - 1, key_of(i - 1), column_of(i - 1), a.head, false);
        }
        if (b.key_tiles > 0) {
          load(it + b.key_tiles - 1, key_of(b.key_tiles - 1), column_of(b.key_tiles - 1), a.head, false);
        }
        it += b.key_tiles;
      }
    }
    return;
  }

  // Consumers.
  sm90::setmaxnreg_increase<consumer_registers>();
  const int consumer = warpgroup - 1;
  const int warp = (tid % warpgroup_threads) / 32;  // within the warpgroup: rows 16 warp ..
  const int lane = tid % 32;
  const int quad_col = 2 * (lane % 4);
  // This thread's accumulator rows within the block: r = 0 and r = 1 (8 below).
  const int thread_row = consumer * rows_per_consumer + warp * 16 + lane / 4;
  const unsigned char* const q_rows = q_smem + consumer * rows_per_consumer * cfg.input_row_bytes();
  unsigned char* const staging = smem + cfg.staging_offset() + consumer * staging_panel_bytes;
  const bool tma_store = schedule.tma_store != 0;
  const float out_scale = p.out_scale * (p.out_fp8 && p.out_scale_ptr != nullptr ? *p.out_scale_ptr : 1.0f);
  const cuda_flash::sm80::Pack2<T> pack{};
  // Ping-pong (schedule.pingpong): the two consumers take turns at issuing
  // their wgmmas, each passing the turn to the other right after, so one's
  // softmax runs while the other's GEMMs occupy the tensor cores. Turn of
  // consumer c: named barrier 1 + c over both consumers' threads, completed by
  // c's bar.sync and the other's bar.arrive. Both consumers reach the same
  // number of issue points (they share every tile), so the turns never stall.
  const bool pingpong = schedule.pingpong != 0;
  const unsigned my_turn = 1u + static_cast<unsigned>(consumer);
  const unsigned other_turn = 2u - static_cast<unsigned>(consumer);
  const auto take_turn = [&] {
    if (pingpong) sm90::named_barrier_sync(my_turn, consumer_threads);
  };
  const auto pass_turn = [&] {
    if (pingpong) sm90::named_barrier_arrive(other_turn, consumer_threads);
  };
  if (pingpong && consumer == 0) sm90::named_barrier_arrive(my_turn, consumer_threads);  // the first turn
  unsigned q_phase = 0;
  int it = 0;
  // The producer's next tile arrives with its Q; -1: none left. (Written with
  // a loop condition: as for (;;), nvcc 13.0 put O in a stack frame.)
  for (int t = 0; t >= 0;) {
    sm90::mbarrier_wait_parity(q_full, q_phase);
    t = *tile_slot;
    if (t < 0) break;
    const detail::TileAssignment a = detail::assign(t, p.num_work, schedule.head_group, p.num_splits);
    const detail::TileBounds b = detail::bounds<Causal>(p, a.work, a.split, block_cols);
    // e4m3: q's and k's descales scale every score of the head, v's its output.
    float scale_log2 = p.scale_log2;
    float v_descale = 1.0f;
    if constexpr (e4m3) {
      scale_log2 *= p.q_descale.at(a.head) * p.k_descale.at(a.head);
      v_descale = p.v_descale.at(a.head);
    }
    float o[HeadDimV / 2];
#pragma unroll
    for (int i = 0; i < HeadDimV / 2; ++i) o[i] = 0.0f;
    float row_max[2] = {-INFINITY, -INFINITY};  // log2 domain
    float row_sum[2] = {0.0f, 0.0f};            // this thread's columns until the epilogue
    const int key_end[2] = {numeric::causal_key_end(b.row0 + thread_row, b.seqlen_q, b.seqlen_k, Causal),
                            numeric::causal_key_end(b.row0 + thread_row + 8, b.seqlen_q, b.seqlen_k, Causal)};

    if (b.key_tiles > 0) {
      // Key tiles run last to first, the masked ones (the causal diagonal and
      // the sequence's last keys) before the rest. Within the loop the P V of
      // tile i - 1 runs on the tensor cores while tile i's softmax runs:
      //   issue S_i = Q K_i^T; issue O += P_{i-1} V_{i-1}; wait for S_i;
      //   release K_i; softmax(S_i); wait for the P V; release V_{i-1};
      //   rescale O.
      const int masked_tiles = b.masked_tiles;
      float s[block_cols / 2];
      std::uint32_t p_frag[block_cols / (e4m3 ? 32 : 16)][4];
      float rescale[2];
      const auto phase_of = [&](int n) { return static_cast<unsigned>(n / stages) & 1u; };
      int prev_stage = it % stages;
      unsigned prev_phase = phase_of(it);
      sm90::mbarrier_wait_parity(k_full(prev_stage), prev_phase);
      take_turn();
      detail::qk_gemm<In, HeadDimQk, block_cols>(s, q_rows, k_smem(prev_stage));
      pass_turn();
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(s);
      sm90::mbarrier_arrive(k_empty(prev_stage));
      // P as the A fragments of O += P V, rounded to T (or e4m3); and that product.
      const auto pack_frag = [&] {
        if constexpr (e4m3) {
          detail::pack_p_e4m3<block_cols>(p_frag, s);
        } else {
          detail::pack_p<T, block_cols>(p_frag, s);
        }
      };
      const auto pv = [&](const unsigned char* v_tile) {
        if constexpr (e4m3) {
          detail::pv_gemm_e4m3<HeadDimV, block_cols>(o, p_frag, v_tile);
        } else {
          detail::pv_gemm<T, HeadDimV, block_cols>(o, p_frag, v_tile);
        }
      };
      if (masked_tiles > 0) {
        detail::online_softmax<true, block_cols, p_offset, KeyMask>(s, row_max, row_sum, rescale, scale_log2,
                                                                    b.last_tile, key_end, quad_col, p, b, thread_row);
      } else {
        detail::online_softmax<false, block_cols, p_offset, KeyMask>(s, row_max, row_sum, rescale, scale_log2,
                                                                     b.last_tile, key_end, quad_col, p, b, thread_row);
      }
      pack_frag();
      ++it;
      const auto step = [&](int i, auto masked) {
        const int stage = it % stages;
        const unsigned phase = phase_of(it);
        sm90::mbarrier_wait_parity(k_full(stage), phase);
        take_turn();
        detail::qk_gemm<In, HeadDimQk, block_cols>(s, q_rows, k_smem(stage));
        sm90::mbarrier_wait_parity(v_full(prev_stage), prev_phase);
        sm90::wgmma_fence_operand(o);
        pv(v_smem(prev_stage));
        pass_turn();
        sm90::wgmma_wait_group<1>();  // S_i has landed; the P V may still run
        sm90::wgmma_fence_operand(s);
        // The wgmmas that read K_i have completed: the producer may refill its slot.
        sm90::mbarrier_arrive(k_empty(stage));
        detail::online_softmax<decltype(masked)::value, block_cols, p_offset, KeyMask>(
            s, row_max, row_sum, rescale, scale_log2, b.last_tile - i, key_end, quad_col, p, b, thread_row);
        sm90::wgmma_wait_group<0>();
        sm90::wgmma_fence_operand(o);
        // The wgmmas that read V_{i-1} have completed: the producer may refill its slot.
        sm90::mbarrier_arrive(v_empty(prev_stage));
        detail::rescale_o<HeadDimV>(o, rescale);
        pack_frag();
        prev_stage = stage;
        prev_phase = phase;
        ++it;
      };
      int i = 1;
      for (; i < masked_tiles; ++i) step(i, std::true_type{});
      for (; i < b.key_tiles; ++i) step(i, std::false_type{});
      // Every wgmma that read Q has completed (each S was waited for): the
      // producer may load the next tile's Q while the last P V and the
      // epilogue run, so the next tile starts without a gap.
      sm90::mbarrier_arrive(q_empty);
      sm90::mbarrier_wait_parity(v_full(prev_stage), prev_phase);
      take_turn();
      sm90::wgmma_fence_operand(o);
      pv(v_smem(prev_stage));
      pass_turn();
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(o);
      sm90::mbarrier_arrive(v_empty(prev_stage));
    } else {
      sm90::mbarrier_arrive(q_empty);  // no key: nothing read Q
    }
    q_phase ^= 1u;

    // Epilogue: full row sums, 1/sum, natural-log LSE; rows without keys get 0 and -inf.
    // §12: the head's sink joins each row's divisor (P's 2^p_offset too),
    // not its LSE; a split's partials leave it to the merge.
    const float sink = gpu::sink_log2(p.mask, a.head, p.num_splits > 1) + static_cast<float>(p_offset);
    float factor[2];
    float lse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = cuda_flash::sm80::quad_sum(row_sum[r]);
      factor[r] = gpu::output_factor(sum, row_max[r], sink) * v_descale;
      lse[r] = gpu::natural_lse(row_max[r], p_offset == 0 ? sum : sum * (1.0f / (1 << p_offset)));
    }
    // With the TMA-store epilogue, O goes through the staging panel: by TMA
    // where this consumer's 64 rows all lie inside the sequence, by 16-byte
    // stores of the rows inside it otherwise.
    const int first_row = b.row0 + consumer * rows_per_consumer;
    if (tma_store && first_row < b.seqlen_q) {
      const int rows = b.seqlen_q - first_row < rows_per_consumer ? b.seqlen_q - first_row : rows_per_consumer;
      const std::int64_t token = static_cast<std::int64_t>(b.q_start) + first_row;
      const detail::StagedRows dst{
          &o_map,
          static_cast<int>(token),
          a.head,
          rows,
          static_cast<unsigned char*>(p.out) +
              (token * p.out_row_stride + static_cast<std::int64_t>(a.head) * p.out_head_stride) * sizeof(T),
          p.out_row_stride * static_cast<std::int64_t>(sizeof(T)),
      };
      detail::store_o_staged<T, HeadDimV>(o, factor, staging, dst, consumer);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = b.row0 + thread_row + 8 * r;  // within the sequence
      if (row >= b.seqlen_q) continue;
      const std::int64_t token = static_cast<std::int64_t>(b.q_start) + row;
      if (p.num_splits > 1) {
        // Split-KV: this key range's normalised output and LSE in float32, for the merge.
        float* partial =
            p.partial_out + ((static_cast<std::int64_t>(a.split) * p.q_tokens + token) * p.num_heads + a.head) *
                                static_cast<std::int64_t>(HeadDimV);
#pragma unroll
        for (int n = 0; n < HeadDimV / 8; ++n) {
          *reinterpret_cast<gpu::FloatPair*>(partial + n * 8 + quad_col) =
              gpu::FloatPair{o[4 * n + 2 * r] * factor[r], o[4 * n + 2 * r + 1] * factor[r]};
        }
        if (lane % 4 == 0) {
          p.partial_lse[(static_cast<std::int64_t>(a.split) * p.num_heads + a.head) * p.q_tokens + token] = lse[r];
        }
        continue;
      }
      if (!tma_store) {
        const std::int64_t out_offset =
            token * p.out_row_stride + static_cast<std::int64_t>(a.head) * p.out_head_stride;
#pragma unroll
        for (int n = 0; n < HeadDimV / 8; ++n) {
          const int col = n * 8 + quad_col;
          const float lo = o[4 * n + 2 * r] * factor[r];
          const float hi = o[4 * n + 2 * r + 1] * factor[r];
          if (p.out_fp8) {
            const auto bits = static_cast<std::uint16_t>(numeric::float_to_fp8_e4m3(lo / out_scale) |
                                                         (numeric::float_to_fp8_e4m3(hi / out_scale) << 8));
            *reinterpret_cast<std::uint16_t*>(static_cast<std::uint8_t*>(p.out) + out_offset + col) = bits;
          } else {
            *reinterpret_cast<std::uint32_t*>(static_cast<T*>(p.out) + out_offset + col) = pack(lo, hi);
          }
        }
      }
      if (p.lse != nullptr && lane % 4 == 0) {
        p.lse[static_cast<std::int64_t>(a.head) * p.lse_head_stride + token * p.lse_token_stride] = lse[r];
      }
    }
  }
  // The TMA stores must have read the staging panel before the block's
  // shared memory goes away.
  if (tma_store && tid % warpgroup_threads == 0) sm90::tma_store_wait<0>();
  // The other consumer's last pass is still counted on this one's turn
  // barrier: complete that phase, so the block leaves no barrier half-done.
  if (pingpong && consumer == 0) sm90::named_barrier_sync(my_turn, consumer_threads);
}

// The transposed copy of e4m3 V the kernel reads (hopper_config.hpp,
// vt_start): `vt` is [head][dv][columns] bytes, columns = vt_columns(...).
// Block (x, head) writes 16 columns of every dv row of one head, a thread one
// row (HeadDimV threads): 16 bytes gathered from 16 keys (neighbouring
// threads read neighbouring bytes of a key's row) and stored as one access.
// Every column is written, pads with zeros.

template <int HeadDimV>
__global__ void __launch_bounds__(HeadDimV)
    transpose_v_e4m3(const FlashParams p, unsigned char* vt, std::int64_t columns) {
  const int batch = p.batch_size;
  const int d = static_cast<int>(threadIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * vt_block_columns;
  // The sequence whose columns hold `first`: the last s with vt_start(s) <= first (-1: none).
  int seq = -1;
  for (int lo = 0, hi = batch - 1; lo <= hi;) {
    const int mid = (lo + hi) / 2;
    if (vt_start(p.cu_seqlens_k[mid], mid) <= first) {
      seq = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  const auto* v = static_cast<const unsigned char*>(p.v) + static_cast<std::int64_t>(head) * p.v_head_stride + d;
  std::uint32_t word[vt_block_columns / 4] = {};
#pragma unroll
  for (int j = 0; j < vt_block_columns; ++j) {
    const std::int64_t column = first + j;
    while (seq + 1 < batch && vt_start(p.cu_seqlens_k[seq + 1], seq + 1) <= column) ++seq;
    if (seq < 0) continue;
    const std::int64_t r = column - vt_start(p.cu_seqlens_k[seq], seq);
    const std::int64_t key = r / 32 * 32 + e4m3_slot_key(static_cast<int>(r % 32));
    if (key >= p.cu_seqlens_k[seq + 1] - p.cu_seqlens_k[seq]) continue;
    const std::uint32_t byte = v[(p.cu_seqlens_k[seq] + key) * p.v_row_stride];
    word[j / 4] |= byte << (8 * (j % 4));
  }
  static_assert(sizeof(detail::Chunk16) == vt_block_columns, "one 16-byte store per thread");
  detail::Chunk16 chunk{};
#pragma unroll
  for (int i = 0; i < vt_block_columns / 4; ++i) chunk.word[i] = word[i];
  *reinterpret_cast<detail::Chunk16*>(vt + (static_cast<std::int64_t>(head) * HeadDimV + d) * columns + first) = chunk;
}

}  // namespace mla::hopper_flash
