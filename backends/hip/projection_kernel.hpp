// The MLA step's up-projection on AMD MFMA: keys and values = latents .
// kv_b_proj^T with v_mfma_f32_32x32x8 (mfma.hpp), operands rounded to the
// compute dtype (bf16 or fp16), fp32 accumulators. Its launch is in
// projection.hip; the GPU emulator compiles this same header with a host
// clang (tests/support/simt/hip_flash_emulated.cpp), so it names no vendor runtime
// header.
//
// Each wave computes the transposed product out^T = W X^T for 32 tokens (the
// B operand, one token per lane % 32) by projection_tile.wave_columns() output
// columns (A operands, projection_tile.column_tiles 32-column tiles), the layout of
// the attention kernel's O^T = V^T P^T (mfma_layout.hpp): a lane's
// accumulators then all belong to one token, in runs of 4 consecutive output
// columns. Operands are read straight from global memory and converted as
// they are loaded (float32 or compute-dtype latents; float32, bf16, fp16 or fp8 weights): no
// LDS, no barrier, the waves of a workgroup are independent. Rows, columns
// and latent indices past the end read as 0, so every k-step is a whole
// product and no token's sums depend on its neighbours.
#pragma once

#include <cstdint>

#include "cuda_hip/latent_params.hpp"
#include "mfma.hpp"
#include "mla/detail/numeric.hpp"
#include "projection_config.hpp"

namespace mla::hip_flash::projection {

using mfma::Accumulator;
using mfma::Operand;
using MLA_GPU_NAMESPACE::latent_kernel::ProjectParams;

// A weight in kv_b_proj's dtype W (or a latent in the compute dtype) as
// float; fp16 by the target's own conversion.
template <DType W>
__device__ inline float weight_value(const typename numeric::Element<W>::Storage& stored) {
  if constexpr (W == DType::float16) {
    return static_cast<float>(__builtin_bit_cast(_Float16, stored));
  } else {
    return numeric::Element<W>::load(stored);
  }
}

// D: the operands' dtype and k's and v's (bf16 or fp16); W: kv_b_proj's dtype.
template <DType D, DType W>
__global__ void __launch_bounds__(projection_tile.threads()) project_mfma_kernel(const ProjectParams p) {
  using WStorage = typename numeric::Element<W>::Storage;
  constexpr int tiles = projection_tile.column_tiles;
  const int wave = static_cast<int>(threadIdx.x) / mfma::wave_size;
  const int lane = static_cast<int>(threadIdx.x) % mfma::wave_size;
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * projection_tile.block_tokens();
  const std::int64_t c0 =
      static_cast<std::int64_t>(blockIdx.y) * projection_tile.block_columns() + wave * projection_tile.wave_columns();
  if (c0 >= p.columns) return;  // the whole wave: its products stay collective

  const std::int64_t token = t0 + mfma::operand_row(lane);
  const bool token_valid = token < p.tokens;
  const std::int64_t latent_row = token * p.latents_stride[0];
  // Latent index l of this lane's token: float32 latents, or the compute dtype's.
  const auto latent = [&](std::int64_t l) {
    const std::int64_t at = latent_row + l * p.latents_stride[1];
    if (p.latents_float) return static_cast<const float*>(p.latents)[at];
    return weight_value<D>(static_cast<const typename numeric::Element<D>::Storage*>(p.latents)[at]);
  };
  const auto* weight = static_cast<const WStorage*>(p.weight);
  Accumulator acc[tiles];
#pragma unroll
  for (int t = 0; t < tiles; ++t) acc[t] = Accumulator{};

  for (std::int64_t k0 = 0; k0 < p.latent_dim; k0 += mfma::k_step) {
    // This lane's 4 latent indices of the step (operand_k), for both operands.
    const std::int64_t k = k0 + mfma::operand_k(lane, 0);
    Operand x;
#pragma unroll
    for (int e = 0; e < mfma::operand_values; ++e) {
      const bool inside = token_valid && k + e < p.latent_dim;
      x[e] = mfma::to_bits<D>(inside ? latent(k + e) : 0.0f);
    }
#pragma unroll
    for (int t = 0; t < tiles; ++t) {
      const std::int64_t column = c0 + t * mfma::tile + mfma::operand_row(lane);
      const bool column_valid = column < p.columns;
      const WStorage* row = weight + column * p.weight_stride[0];
      Operand w;
#pragma unroll
      for (int e = 0; e < mfma::operand_values; ++e) {
        const bool inside = column_valid && k + e < p.latent_dim;
        w[e] = mfma::to_bits<D>(inside ? weight_value<W>(row[(k + e) * p.weight_stride[1]]) : 0.0f);
      }
      acc[t] = mfma::product<D>(w, x, acc[t]);
    }
  }

  // Accumulator r of tile t: output column c0 + 32 t + acc_row(lane, r) of token t0 + acc_col(lane).
  const std::int64_t out_token = t0 + mfma::acc_col(lane);
  if (out_token >= p.tokens) return;
  auto* k_out = static_cast<short*>(p.k);
  auto* v_out = static_cast<short*>(p.v);
#pragma unroll
  for (int t = 0; t < tiles; ++t) {
#pragma unroll
    for (int r = 0; r < mfma::accumulators; ++r) {
      const std::int64_t column = c0 + t * mfma::tile + mfma::acc_row(lane, r);
      if (column >= p.columns) continue;
      const auto at = MLA_GPU_NAMESPACE::latent_kernel::projected_at(p, out_token, column);
      (at.key ? k_out : v_out)[at.offset] = mfma::to_bits<D>(acc[t][r]);
    }
  }
}

// Calls launch(kernel, how, params) with the instance for kv_b_proj's dtype
// and k's (bf16 or fp16; the caller sends float32 elsewhere), or nothing when
// there are no tokens.
template <class Launch>
void project_mfma_with(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k, const TensorView& v,
                       Launch&& launch) {
  namespace lk = MLA_GPU_NAMESPACE::latent_kernel;
  const ProjectParams params = lk::project_params(latents, kv_b_proj, k, v);
  if (params.tokens == 0 || params.columns == 0) return;
  lk::LatentLaunch how = lk::project_grid(params, projection_tile.block_tokens(), projection_tile.block_columns());
  how.block_x = static_cast<unsigned>(projection_tile.threads());
  how.name = lk::kernel_name("project_mfma", kv_b_proj.dtype, k.dtype);
  lk::with_dtype(kv_b_proj.dtype, [&](auto w_type) {
    if (k.dtype == DType::bfloat16) {
      launch(&project_mfma_kernel<DType::bfloat16, w_type()>, how, params);
    } else if (k.dtype == DType::float16) {
      launch(&project_mfma_kernel<DType::float16, w_type()>, how, params);
    } else {
      raise(ErrorCategory::internal, "project_mfma: k must be bfloat16 or float16, got " + k.describe());
    }
  });
}

}  // namespace mla::hip_flash::projection
