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
#pragma once

#include <cmath>
#include <cstdint>

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

// The kernel's body for one tile row.
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family>
__device__ inline void flash_forward(const FlashParams& p) {
  constexpr FlashTileConfig c = flash_tile_config<HeadDimQk, HeadDimV, Family>();
  constexpr int qk_steps = HeadDimQk / mfma::k_step;
  constexpr int key_tiles = c.block_cols / mfma::tile;  // 32-key S^T tiles per block tile
  constexpr int out_tiles = HeadDimV / mfma::tile;      // 32-dim O^T tiles
  constexpr int pv_steps = c.block_cols / mfma::k_step;
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
  const gpu::KeyTileRange range = gpu::split_key_tiles(gpu::ceil_div(block_keys, c.block_cols), split, p.num_splits);
  const int keys_end = min(block_keys, range.end * c.block_cols);

  // Q^T as B operands: value e of step s is q[row][8s + operand_k(lane, e)].
  const auto* q = static_cast<const std::uint16_t*>(p.q) + (q_start + static_cast<std::int64_t>(row)) * p.q_row_stride +
                  head * p.q_head_stride;
  Operand q_ops[qk_steps];
#pragma unroll
  for (int s = 0; s < qk_steps; ++s) {
    q_ops[s] =
        row_valid ? *reinterpret_cast<const Operand*>(q + s * mfma::k_step + mfma::operand_k(lane, 0)) : Operand{};
  }

  const auto* k = static_cast<const std::uint16_t*>(p.k) + k_start * p.k_row_stride + head * p.k_head_stride;
  const auto* v = static_cast<const std::uint16_t*>(p.v) + k_start * p.v_row_stride + head * p.v_head_stride;
  Accumulator o[out_tiles];
#pragma unroll
  for (int t = 0; t < out_tiles; ++t) o[t] = Accumulator{};
  float row_max = -INFINITY;  // log2 domain, shared by the lane pair
  float lane_sum = 0.0f;      // this lane's half of the row sum, at base exp2_base(row_max)

  for (int key0 = range.begin * c.block_cols; key0 < keys_end; key0 += c.block_cols) {
    __syncthreads();  // every wave is done with the previous tile
    stage_k<c>(k_lds, k + key0 * p.k_row_stride, p.k_row_stride, seqlen_k - key0);
    stage_v_transposed<c>(vt_lds, v + key0 * p.v_row_stride, p.v_row_stride, seqlen_k - key0);
    __syncthreads();
    if (key0 >= wave_keys) continue;  // wave-uniform: none of this wave's rows sees these keys

    Accumulator s[key_tiles];
#pragma unroll
    for (int t = 0; t < key_tiles; ++t) {
      s[t] = Accumulator{};
      const short* k_row = k_lds + (t * mfma::tile + mfma::operand_row(lane)) * c.k_row() + mfma::operand_k(lane, 0);
#pragma unroll
      for (int step = 0; step < qk_steps; ++step) {
        const Operand k_op = *reinterpret_cast<const Operand*>(k_row + step * mfma::k_step);
        s[t] = mfma::product<D>(k_op, q_ops[step], s[t]);
      }
    }

    const bool masked = key0 + c.block_cols > wave_unmasked_keys;  // wave-uniform
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < key_tiles; ++t) {
#pragma unroll
      for (int r = 0; r < mfma::accumulators; ++r) {
        float score = s[t][r] * p.scale_log2;
        if (masked && key0 + t * mfma::tile + mfma::acc_row(lane, r) >= row_keys) score = -INFINITY;
        s[t][r] = score;
        tile_max = fmaxf(tile_max, score);
      }
    }
    tile_max = fmaxf(tile_max, row_partner(tile_max));
    const float new_max = fmaxf(row_max, tile_max);
    const float base = gpu::exp2_base(new_max);
    const float factor = gpu::rescale_factor(row_max, base);
    row_max = new_max;

    float tile_sum = 0.0f;
#pragma unroll
    for (int t = 0; t < key_tiles; ++t) {
#pragma unroll
      for (int r = 0; r < mfma::accumulators; ++r) {
        s[t][r] = exp2f(s[t][r] - base);
        tile_sum += s[t][r];
      }
    }
    lane_sum = lane_sum * factor + tile_sum;
#pragma unroll
    for (int t = 0; t < out_tiles; ++t) o[t] *= factor;

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
      const short* vt = vt_lds + mfma::operand_row(lane) * c.vt_row() + step * mfma::k_step + mfma::operand_k(lane, 0);
#pragma unroll
      for (int t = 0; t < out_tiles; ++t) {
        const Operand v_op = *reinterpret_cast<const Operand*>(vt + t * mfma::tile * c.vt_row());
        o[t] = mfma::product<D>(v_op, p_op, o[t]);
      }
    }
  }

  const float row_sum = lane_sum + row_partner(lane_sum);
  if (!row_valid) return;
  const float factor = gpu::output_factor(row_sum);
  // Split-KV: this key range's normalised output and LSE in float32, for the merge.
  const bool partial = p.num_splits > 1;
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
  if (lse != nullptr && lane < mfma::tile) *lse = gpu::natural_lse(row_max, row_sum);
}

}  // namespace detail

// Whether this compile pass holds `Family`'s kernels (MLA_AMD_TILE_FAMILY).
template <TileFamily Family>
inline constexpr bool tile_family_compiled = MLA_AMD_TILE_FAMILY < 0 || MLA_AMD_TILE_FAMILY == static_cast<int>(Family);

// The launch bounds ask for the row's occupancy: its threads and its waves
// per SIMD (HIP's second __launch_bounds__ argument), which caps the
// registers the compiler may give each lane.
template <DType D, int HeadDimQk, int HeadDimV, TileFamily Family>
__global__ void __launch_bounds__((flash_tile_config<HeadDimQk, HeadDimV, Family>().threads()),
                                  (flash_tile_config<HeadDimQk, HeadDimV, Family>().waves_per_simd()))
    flash_forward_kernel(const FlashParams p) {
  if constexpr (tile_family_compiled<Family>) {
    detail::flash_forward<D, HeadDimQk, HeadDimV, Family>(p);
  } else {
    // Another generation's row: never launched on this target.
    __builtin_trap();
  }
}

}  // namespace mla::hip_flash
