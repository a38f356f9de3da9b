// The HIP_FLASH forward kernel (the FlashAttention-2 algorithm on 32x32x8
// MFMA, wave64). Its launcher is in flash_kernel_launch.hpp; the GPU emulator
// (tests/support/simt) compiles this same header with a host clang, so it names no
// vendor runtime header: the device builtins come through mfma.hpp.
//
// One workgroup per (work item, head); a work item is one query tile of one
// sequence, heaviest first. The tile comes from the row of the device's
// generation (flash_config.hpp); each gfx target compiles only its own rows. Each wave owns 32 query rows, held as B
// operands of Q for the whole block; lane l and lane l ^ 32 share row l % 32. Per key tile the workgroup stages K
// ([keys][dqk]) and V transposed ([dv][keys]) in LDS, then every wave computes
//   S^T = K Q^T        (MFMA; K operands from LDS, Q from registers)
//   scale into the log2 domain, mask where needed, online softmax: a lane's
//   16 accumulators per 32 keys all belong to its row, one xor-32 shuffle
//   completes the row max
//   O^T += V^T P^T     (MFMA; V^T operands from LDS, P^T straight from the
//                       S^T accumulators, rounded to the input dtype)
// Key tiles no row of the block sees are never loaded; tiles past the last key
// a wave's rows see are skipped by that wave; only tiles that cross a row's
// last visible key (or the sequence end) are masked. The epilogue divides by
// the row sum and writes out (q's dtype or fp8 e4m3) and the natural-log LSE;
// a row without keys gets 0 and -inf. With split-KV, blockIdx.z picks one
// range of the key tiles, and the epilogue writes float32 partials instead,
// which a merge kernel joins.
//
// float8_e4m3 inputs (E4m3, CDNA3 only: gfx940-942's v_mfma_f32_32x32x16_fp8)
// take the same path with 16 keys or dims per k-step, and:
//   - the MFMA reads FNUZ e4m3 (bias 8), in which an OCP e4m3fn byte is half
//     its value for every finite code: the bytes are staged as they are but
//     for -0 (0x80, FNUZ's NaN) -> 0 and OCP's NaN (0x7f, 0xff) -> 0x80, and
//     the scale takes back 4 for the two halved operands of S, the epilogue
//     2 for V;
//   - q's and k's descales fold into the scale, v's into the epilogue;
//   - P is kept 2^7 larger (at most 128 of FNUZ's 240) and rounded to FNUZ
//     for the P^T operand, so weights down to 2^-17 of a row's largest stay;
//   - a lane's 8 S^T accumulators of a 16-key step are keys 4h..4h+3 and
//     4h+8..4h+11 (h = lane / 32), not the operand's 8h..8h+7: V^T is staged
//     with the same keys in those positions (bits 2 and 3 of the key within
//     its 16 swapped), so P^T is still the accumulators as they are.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/softmax.hpp"
#include "cuda_hip/work_schedule.hpp"
#include "flash_config.hpp"
#include "mfma.hpp"
#include "mla/detail/numeric.hpp"

namespace mla::hip_flash {

using gpu::FlashParams;

namespace detail {

using mfma::Accumulator;
using mfma::Operand;

// 16 bytes of a global row: two operands' worth of values.
struct alignas(16) Chunk {
  Operand lo;
  Operand hi;
};

using mfma::to_bits;

// Row max and sum partners: the lane holding the other 16 keys of the row.
__device__ inline float row_partner(float value) { return __shfl_xor(value, mfma::tile, mfma::wave_size); }

// K tile [Bc][dqk] -> LDS rows of k_row elements; keys >= valid_keys become
// zeros (their scores are masked, but 0 * NaN poison would not be).
template <FlashTileConfig C>
__device__ inline void stage_k(short* lds, const std::uint16_t* src, std::int64_t row_stride, int valid_keys) {
  constexpr int row_chunks = C.head_dim_qk / chunk_elements;
  constexpr int passes = C.block_cols * row_chunks / C.threads();
#pragma unroll
  for (int pass = 0; pass < passes; ++pass) {
    const int index = static_cast<int>(threadIdx.x) + pass * C.threads();
    const int key = index / row_chunks;
    const int chunk = index % row_chunks;
    Chunk value{};
    if (key < valid_keys) {
      value = *reinterpret_cast<const Chunk*>(src + key * row_stride + chunk * chunk_elements);
    }
    // Padded rows are 8-byte aligned only: two operand-sized stores.
    auto* dst = reinterpret_cast<Operand*>(lds + key * C.k_row() + chunk * chunk_elements);
    dst[0] = value.lo;
    dst[1] = value.hi;
  }
}

// V tile [Bc][dv] -> LDS as V^T [dv][vt_row], so that a lane's 4 keys of one
// output dim are one 8-byte read. Keys >= valid_keys become zeros.
template <FlashTileConfig C>
__device__ inline void stage_v_transposed(short* lds, const std::uint16_t* src, std::int64_t row_stride,
                                          int valid_keys) {
  constexpr int row_chunks = C.head_dim_v / chunk_elements;
  constexpr int passes = C.block_cols * row_chunks / C.threads();
#pragma unroll
  for (int pass = 0; pass < passes; ++pass) {
    const int index = static_cast<int>(threadIdx.x) + pass * C.threads();
    const int key = index / row_chunks;
    const int chunk = index % row_chunks;
    Chunk value{};
    if (key < valid_keys) {
      value = *reinterpret_cast<const Chunk*>(src + key * row_stride + chunk * chunk_elements);
    }
    short* column = lds + chunk * chunk_elements * C.vt_row() + key;
#pragma unroll
    for (int e = 0; e < mfma::operand_values; ++e) {
      column[e * C.vt_row()] = value.lo[e];
      column[(e + mfma::operand_values) * C.vt_row()] = value.hi[e];
    }
  }
}

// ---- float8_e4m3 inputs (CDNA3) ----

// 8 OCP e4m3fn bytes as CDNA3's FNUZ bytes of half their values: -0 becomes
// 0, NaN (0x7f, 0xff) FNUZ's NaN (0x80); every other byte is kept.
__device__ inline std::uint64_t ocp_to_fnuz(std::uint64_t bytes) {
  std::uint64_t out = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    std::uint64_t byte = (bytes >> (8 * i)) & 0xffu;
    byte = byte == 0x80u ? 0u : (byte & 0x7fu) == 0x7fu ? 0x80u : byte;
    out |= byte << (8 * i);
  }
  return out;
}

// The FNUZ byte of a weight 0 <= p <= 128: the OCP byte of 2p (whose value
// is twice the FNUZ value of the same byte), rounded to nearest even.
__device__ inline std::uint64_t fnuz_weight(float p) { return numeric::float_to_fp8_e4m3(2.0f * p); }

// Bytes per LDS row of an e4m3 K tile and V^T tile: 8 bytes of padding.
template <FlashTileConfig C>
inline constexpr int e4m3_k_row = C.head_dim_qk + 8;
template <FlashTileConfig C>
inline constexpr int e4m3_vt_row = C.block_cols + 8;

// Where key `key` of a block tile sits in an e4m3 V^T row: bits 2 and 3 of
// its place within 16 keys swapped (the top of this file).
MLA_HOST_DEVICE constexpr int e4m3_vt_position(int key) { return (key & ~12) | ((key & 4) << 1) | ((key & 8) >> 1); }

struct alignas(16) Bytes16 {
  std::uint64_t lo;
  std::uint64_t hi;
};

// The 16-byte chunks of a [Bc][Dim] tile of e4m3 bytes this thread stages:
// store(key, chunk, lo, hi) with the chunk's 16 bytes as FNUZ (zeros for keys
// >= valid_keys).
template <FlashTileConfig C, int Dim, class Store>
__device__ inline void stage_e4m3(const std::uint8_t* src, std::int64_t row_stride, int valid_keys, Store store) {
  constexpr int row_chunks = Dim / 16;
  constexpr int chunks = C.block_cols * row_chunks;
#pragma unroll
  for (int pass = 0; pass < (chunks + C.threads() - 1) / C.threads(); ++pass) {
    const int index = static_cast<int>(threadIdx.x) + pass * C.threads();
    if (chunks % C.threads() != 0 && index >= chunks) break;
    const int key = index / row_chunks;
    const int chunk = index % row_chunks;
    Bytes16 value{};
    if (key < valid_keys) value = *reinterpret_cast<const Bytes16*>(src + key * row_stride + chunk * 16);
    store(key, chunk, ocp_to_fnuz(value.lo), ocp_to_fnuz(value.hi));
  }
}

// K tile [Bc][dqk] -> LDS rows of e4m3_k_row bytes.
template <FlashTileConfig C>
__device__ inline void stage_k_e4m3(unsigned char* lds, const std::uint8_t* src, std::int64_t row_stride,
                                    int valid_keys) {
  stage_e4m3<C, C.head_dim_qk>(src, row_stride, valid_keys,
                               [lds](int key, int chunk, std::uint64_t lo, std::uint64_t hi) {
                                 auto* dst = reinterpret_cast<std::uint64_t*>(lds + key * e4m3_k_row<C> + chunk * 16);
                                 dst[0] = lo;
                                 dst[1] = hi;
                               });
}

// V tile [Bc][dv] -> LDS as V^T [dv][e4m3_vt_row], each key at e4m3_vt_position.
template <FlashTileConfig C>
__device__ inline void stage_v_transposed_e4m3(unsigned char* lds, const std::uint8_t* src, std::int64_t row_stride,
                                               int valid_keys) {
  stage_e4m3<C, C.head_dim_v>(
      src, row_stride, valid_keys, [lds](int key, int chunk, std::uint64_t lo, std::uint64_t hi) {
        const std::uint64_t halves[2] = {lo, hi};
        unsigned char* column = lds + chunk * 16 * e4m3_vt_row<C> + e4m3_vt_position(key);
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          column[e * e4m3_vt_row<C>] = static_cast<unsigned char>(halves[e / 8] >> (8 * (e % 8)));
        }
      });
}

// Writes one lane's 4 consecutive output dims (accumulators 4g..4g+3 of tile t).
template <DType D>
__device__ inline void store_out(const FlashParams& p, std::int64_t offset, const Accumulator& acc, int group,
                                 float factor, float out_scale) {
  float v[mfma::operand_values];
#pragma unroll
  for (int e = 0; e < mfma::operand_values; ++e) v[e] = acc[4 * group + e] * factor;
  if (p.out_fp8) {
    std::uint32_t word = 0;
#pragma unroll
    for (int e = 0; e < mfma::operand_values; ++e) {
      word |= static_cast<std::uint32_t>(numeric::float_to_fp8_e4m3(v[e] / out_scale)) << (8 * e);
    }
    *reinterpret_cast<std::uint32_t*>(static_cast<std::uint8_t*>(p.out) + offset) = word;
  } else {
    Operand bits;
#pragma unroll
    for (int e = 0; e < mfma::operand_values; ++e) bits[e] = to_bits<D>(v[e]);
    *reinterpret_cast<Operand*>(static_cast<std::uint16_t*>(p.out) + offset) = bits;
  }
}

// The same 4 dims of a split's float32 partial output: one 16-byte store.
__device__ inline void store_partial(float* dst, const Accumulator& acc, int group, float factor) {
  struct alignas(16) Floats {
    float value[mfma::operand_values];
  } values;
#pragma unroll
  for (int e = 0; e < mfma::operand_values; ++e) values.value[e] = acc[4 * group + e] * factor;
  *reinterpret_cast<Floats*>(dst) = values;
}

// The kernel's body for one tile row: D is the output dtype, and the inputs'
// unless E4m3.
// Masked: the launch has docs/contract.md §12's key mask or sinks; only
// those instantiations read them (their registers would make the others
// spill).
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family, bool E4m3, bool Masked>
__device__ inline void flash_forward(const FlashParams& p) {
  constexpr FlashTileConfig c = flash_tile_config<HeadDimQk, HeadDimV, Family>();
  constexpr int k_step = E4m3 ? 16 : mfma::k_step;  // k of one MFMA
  constexpr int qk_steps = HeadDimQk / k_step;
  constexpr int key_tiles = c.block_cols / mfma::tile;  // 32-key S^T tiles per block tile
  constexpr int out_tiles = HeadDimV / mfma::tile;      // 32-dim O^T tiles
  constexpr int pv_steps = c.block_cols / k_step;
  // e4m3: P is 2^7 larger than exp2(s - max), and FNUZ halves every operand.
  constexpr int p_offset = E4m3 ? 7 : 0;
  static_assert(!E4m3 || (HeadDimQk % 16 == 0 && HeadDimV % 16 == 0 && c.block_cols % 16 == 0),
                "e4m3: 16-byte chunks and 16-key steps");
  static_assert(!E4m3 || (e4m3_k_row<c> * c.block_cols <= 2 * c.k_tile_elements() &&
                          e4m3_vt_row<c> * HeadDimV <= 2 * c.vt_tile_elements()),
                "e4m3 tiles fit the 16-bit tiles' LDS");
  // 16-byte aligned: both tiles are read and written as 8-byte operands.
  alignas(16) __shared__ short k_lds[c.k_tile_elements()];
  alignas(16) __shared__ short vt_lds[c.vt_tile_elements()];

  const gpu::WorkItem item = gpu::work_item(p.work, p.tiles_per_seq, static_cast<int>(blockIdx.x));
  const int head = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);  // split-KV: this block's range of the key tiles
  const int q_start = p.cu_seqlens_q[item.seq];
  const int seqlen_q = p.cu_seqlens_q[item.seq + 1] - q_start;
  // Only without a work list: a tile past the sequence's end (uniform per block, before any barrier).
  if (item.q_tile * c.block_rows() >= seqlen_q) return;
  const int k_start = p.cu_seqlens_k[item.seq];
  const int seqlen_k = p.cu_seqlens_k[item.seq + 1] - k_start;
  const int block_row = item.q_tile * c.block_rows();
  const int block_rows = min(c.block_rows(), seqlen_q - block_row);

  const int wave = static_cast<int>(threadIdx.x) / mfma::wave_size;
  const int lane = static_cast<int>(threadIdx.x) % mfma::wave_size;
  const int wave_row = block_row + wave * wave_rows;
  const bool wave_active = wave_row < seqlen_q;
  const int row = wave_row + mfma::operand_row(lane);  // this lane's query row in the sequence
  const bool row_valid = row < seqlen_q;
  const int row_keys = numeric::causal_key_end(row, seqlen_q, seqlen_k, p.causal);
  // The wave's first row sees the fewest keys, its last valid row the most.
  const int wave_unmasked_keys = numeric::causal_key_end(wave_row, seqlen_q, seqlen_k, p.causal);
  const int wave_keys =
      wave_active ? numeric::causal_key_end(min(wave_row + wave_rows, seqlen_q) - 1, seqlen_q, seqlen_k, p.causal) : 0;
  const int block_keys = gpu::tile_key_end(block_row, block_rows, seqlen_q, seqlen_k, p.causal);
  // §12: this sequence's key mask (none: every key passes). A window starts
  // the key loop at the tile of the block's first row's first key.
  const gpu::SequenceMask mask = Masked ? gpu::sequence_mask(p.mask, item.seq) : gpu::SequenceMask{};
  const bool key_masked = Masked && p.mask.masks_keys();
  const int all_tiles = gpu::ceil_div(block_keys, c.block_cols);
  const int window_tile = mask.first_key_tile(block_row, all_tiles, c.block_cols);
  const gpu::KeyTileRange range = gpu::split_key_tiles(all_tiles - window_tile, split, p.num_splits);
  const int keys_end = min(block_keys, (window_tile + range.end) * c.block_cols);
  // e4m3: the descales, and what FNUZ's halving took from S (4) and from V (2).
  float score_scale = p.scale_log2;
  float out_factor = 1.0f;
  if constexpr (E4m3) {
    score_scale *= 4.0f * p.q_descale.at(head) * p.k_descale.at(head);
    out_factor = 2.0f * p.v_descale.at(head);
  }

  // Q^T as B operands: value e of step s is q[row][k_step s + operand_k(lane, e)]
  // (e4m3: 8 bytes at k 16 s + 8 (lane / 32)).
  using Element = std::conditional_t<E4m3, std::uint8_t, std::uint16_t>;
  using QOperand = std::conditional_t<E4m3, std::uint64_t, Operand>;
  const auto* q = static_cast<const Element*>(p.q) + (q_start + static_cast<std::int64_t>(row)) * p.q_row_stride +
                  head * p.q_head_stride;
  QOperand q_ops[qk_steps];
#pragma unroll
  for (int s = 0; s < qk_steps; ++s) {
    if constexpr (E4m3) {
      q_ops[s] =
          row_valid ? ocp_to_fnuz(*reinterpret_cast<const std::uint64_t*>(q + s * 16 + 8 * (lane / mfma::tile))) : 0u;
    } else {
      q_ops[s] =
          row_valid ? *reinterpret_cast<const Operand*>(q + s * mfma::k_step + mfma::operand_k(lane, 0)) : Operand{};
    }
  }

  const auto* k = static_cast<const Element*>(p.k) + k_start * p.k_row_stride + head * p.k_head_stride;
  const auto* v = static_cast<const Element*>(p.v) + k_start * p.v_row_stride + head * p.v_head_stride;
  auto* const k_bytes = reinterpret_cast<unsigned char*>(k_lds);
  auto* const vt_bytes = reinterpret_cast<unsigned char*>(vt_lds);
  Accumulator o[out_tiles];
#pragma unroll
  for (int t = 0; t < out_tiles; ++t) o[t] = Accumulator{};
  float row_max = -INFINITY;  // log2 domain, shared by the lane pair
  float lane_sum = 0.0f;      // this lane's half of the row sum, at base exp2_base(row_max)

  for (int key0 = (window_tile + range.begin) * c.block_cols; key0 < keys_end; key0 += c.block_cols) {
    if (Masked && mask.words != nullptr) {
      // Top-k bits: a tile no row of the block sees is never staged. Each
      // thread checks its share of the rows; the barrier also says every
      // wave is done with the previous tile.
      bool seen = false;
      for (int r = static_cast<int>(threadIdx.x); r < block_rows && !seen; r += c.threads()) {
        const int end = numeric::causal_key_end(block_row + r, seqlen_q, seqlen_k, p.causal);
        for (int t = 0; t < key_tiles; ++t) seen = seen || mask.seen(block_row + r, key0 + t * mfma::tile, end) != 0;
      }
      if (!__syncthreads_or(seen)) continue;
    } else {
      __syncthreads();  // every wave is done with the previous tile
    }
    if constexpr (E4m3) {
      stage_k_e4m3<c>(k_bytes, k + key0 * p.k_row_stride, p.k_row_stride, seqlen_k - key0);
      stage_v_transposed_e4m3<c>(vt_bytes, v + key0 * p.v_row_stride, p.v_row_stride, seqlen_k - key0);
    } else {
      stage_k<c>(k_lds, k + key0 * p.k_row_stride, p.k_row_stride, seqlen_k - key0);
      stage_v_transposed<c>(vt_lds, v + key0 * p.v_row_stride, p.v_row_stride, seqlen_k - key0);
    }
    __syncthreads();
    if (key0 >= wave_keys) continue;  // wave-uniform: none of this wave's rows sees these keys

    Accumulator s[key_tiles];
#pragma unroll
    for (int t = 0; t < key_tiles; ++t) {
      s[t] = Accumulator{};
      if constexpr (E4m3) {
        const unsigned char* k_row =
            k_bytes + (t * mfma::tile + mfma::operand_row(lane)) * e4m3_k_row<c> + 8 * (lane / mfma::tile);
#pragma unroll
        for (int step = 0; step < qk_steps; ++step) {
          const auto k_op = *reinterpret_cast<const std::uint64_t*>(k_row + step * 16);
          s[t] = mfma::product_fp8(static_cast<long>(k_op), static_cast<long>(q_ops[step]), s[t]);
        }
      } else {
        const short* k_row = k_lds + (t * mfma::tile + mfma::operand_row(lane)) * c.k_row() + mfma::operand_k(lane, 0);
#pragma unroll
        for (int step = 0; step < qk_steps; ++step) {
          const Operand k_op = *reinterpret_cast<const Operand*>(k_row + step * mfma::k_step);
          s[t] = mfma::product<D>(k_op, q_ops[step], s[t]);
        }
      }
    }

    // Wave-uniform; with a key mask every tile is masked by the row's seen
    // keys (one word per 32-key S^T tile, causality included).
    const bool masked = key_masked || key0 + c.block_cols > wave_unmasked_keys;
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < key_tiles; ++t) {
      const std::uint32_t keep = key_masked && row_valid ? mask.seen(row, key0 + t * mfma::tile, row_keys) : 0u;
#pragma unroll
      for (int r = 0; r < mfma::accumulators; ++r) {
        float score = s[t][r] * score_scale;
        const bool hidden = key_masked ? ((keep >> mfma::acc_row(lane, r)) & 1u) == 0
                                       : key0 + t * mfma::tile + mfma::acc_row(lane, r) >= row_keys;
        if (masked && hidden) score = -INFINITY;
        s[t][r] = score;
        tile_max = fmaxf(tile_max, score);
      }
    }
    tile_max = fmaxf(tile_max, row_partner(tile_max));
    const float new_max = fmaxf(row_max, tile_max);
    const float base = gpu::exp2_base(new_max);
    const float factor = gpu::rescale_factor(row_max, base);
    row_max = new_max;
    const float shift = p_offset == 0 ? base : base - static_cast<float>(p_offset);

    float tile_sum = 0.0f;
#pragma unroll
    for (int t = 0; t < key_tiles; ++t) {
#pragma unroll
      for (int r = 0; r < mfma::accumulators; ++r) {
        s[t][r] = exp2f(s[t][r] - shift);
        tile_sum += s[t][r];
      }
    }
    lane_sum = lane_sum * factor + tile_sum;
#pragma unroll
    for (int t = 0; t < out_tiles; ++t) o[t] *= factor;

    if constexpr (E4m3) {
#pragma unroll
      for (int step = 0; step < pv_steps; ++step) {
        // P^T operand of the 16 keys of step (in V^T's order): eight S^T
        // accumulators as they are, rounded to FNUZ.
        const Accumulator& probabilities = s[step / 2];
        std::uint64_t p_op = 0;
#pragma unroll
        for (int e = 0; e < 8; ++e) p_op |= fnuz_weight(probabilities[8 * (step % 2) + e]) << (8 * e);
        const unsigned char* vt =
            vt_bytes + mfma::operand_row(lane) * e4m3_vt_row<c> + step * 16 + 8 * (lane / mfma::tile);
#pragma unroll
        for (int t = 0; t < out_tiles; ++t) {
          const auto v_op = *reinterpret_cast<const std::uint64_t*>(vt + t * mfma::tile * e4m3_vt_row<c>);
          o[t] = mfma::product_fp8(static_cast<long>(v_op), static_cast<long>(p_op), o[t]);
        }
      }
    } else {
#pragma unroll
      for (int step = 0; step < pv_steps; ++step) {
        // P^T operand of keys 8 step .. 8 step + 7: four S^T accumulators as they are.
        const Accumulator& probabilities = s[step / (mfma::tile / mfma::k_step)];
        const int local_step = step % (mfma::tile / mfma::k_step);
        Operand p_op;
#pragma unroll
        for (int e = 0; e < mfma::operand_values; ++e) {
          p_op[e] = to_bits<D>(probabilities[mfma::p_register(local_step, e)]);
        }
        const short* vt =
            vt_lds + mfma::operand_row(lane) * c.vt_row() + step * mfma::k_step + mfma::operand_k(lane, 0);
#pragma unroll
        for (int t = 0; t < out_tiles; ++t) {
          const Operand v_op = *reinterpret_cast<const Operand*>(vt + t * mfma::tile * c.vt_row());
          o[t] = mfma::product<D>(v_op, p_op, o[t]);
        }
      }
    }
  }

  const float row_sum = lane_sum + row_partner(lane_sum);
  if (!row_valid) return;
  // Split-KV: this key range's normalised output and LSE in float32, for the merge.
  const bool partial = p.num_splits > 1;
  // §12: the head's sink joins the row's divisor (P's 2^p_offset too), not
  // its LSE; a split's partials leave it to the merge.
  float factor = gpu::output_factor(row_sum) * out_factor;
  if constexpr (Masked) {
    const float sink = gpu::sink_log2(p.mask, head, partial) + static_cast<float>(p_offset);
    factor = gpu::output_factor(row_sum, row_max, sink) * out_factor;
  }
  const std::int64_t token = q_start + static_cast<std::int64_t>(row);
  // A device-held fp8 scale is read here, once, when the kernel runs (graph
  // replays see updates); the host then passes out_scale 1, so the product is
  // exact. (Selecting between the pointer and &p.out_scale instead makes the
  // compiler copy the kernel arguments to scratch.)
  const float out_scale = p.out_scale * (p.out_scale_ptr != nullptr ? *p.out_scale_ptr : 1.0f);
  const std::int64_t out_row = partial ? ((split * p.q_tokens + token) * p.num_heads + head) * HeadDimV
                                       : token * p.out_row_stride + head * p.out_head_stride;
#pragma unroll
  for (int t = 0; t < out_tiles; ++t) {
#pragma unroll
    for (int group = 0; group < mfma::accumulators / mfma::operand_values; ++group) {
      const int dim = t * mfma::tile + mfma::acc_row(lane, 4 * group);
      if (partial) {
        store_partial(p.partial_out + out_row + dim, o[t], group, factor);
      } else {
        store_out<D>(p, out_row + dim, o[t], group, factor, out_scale);
      }
    }
  }
  float* const lse = partial            ? p.partial_lse + (split * p.num_heads + head) * p.q_tokens + token
                     : p.lse != nullptr ? p.lse + head * p.lse_head_stride + token * p.lse_token_stride
                                        : nullptr;
  if (lse != nullptr && lane < mfma::tile) {
    *lse = gpu::natural_lse(row_max, p_offset == 0 ? row_sum : row_sum * (1.0f / (1 << p_offset)));
  }
}

}  // namespace detail

// Whether this compile pass holds `Family`'s kernels (MLA_AMD_TILE_FAMILY).
template <TileFamily Family>
inline constexpr bool tile_family_compiled = MLA_AMD_TILE_FAMILY < 0 || MLA_AMD_TILE_FAMILY == static_cast<int>(Family);

// The launch bounds ask for the row's occupancy: its threads and its waves
// per SIMD (HIP's second __launch_bounds__ argument), which caps the
// registers the compiler may give each lane.
// E4m3: float8_e4m3 inputs, D the output dtype; CDNA3's rows only.
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family, bool E4m3 = false, bool Masked = false>
__global__ void __launch_bounds__((flash_tile_config<HeadDimQk, HeadDimV, Family>().threads()),
                                  (flash_tile_config<HeadDimQk, HeadDimV, Family>().waves_per_simd()))
    flash_forward_kernel(const FlashParams p) {
  static_assert(!E4m3 || Family == TileFamily::cdna3, "e4m3 inputs: CDNA3's fp8 MFMA");
  if constexpr (tile_family_compiled<Family>) {
    detail::flash_forward<D, HeadDimQk, HeadDimV, Family, E4m3, Masked>(p);
  } else {
    // Another generation's row: never launched on this target.
    __builtin_trap();
  }
}

}  // namespace mla::hip_flash
