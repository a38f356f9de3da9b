// The MLA step's up-projection on NVIDIA tensor cores: keys and values =
// latents . kv_b_proj^T with mma.sync m16n8k16, operands rounded to the
// compute dtype (bf16 or fp16), fp32 accumulators. The GPU emulator compiles
// this same header with a host compiler (tests/support/simt/projection_emulated.cpp).
//
// Each warp owns 16 tokens x 64 output columns (8 n-tiles) and reads its
// fragments straight from global memory (fragment_layout.hpp): no shared
// memory, no barrier. Each lane's A values are latents of 2 tokens, its B
// values weights of 1 column, both at 4 latent indices of a 16-wide step;
// rows, columns and latent indices past the end read as 0, so every k-step
// is a whole mma and no token's sums depend on its neighbours.
#pragma once

#include <cstdint>

#include "cuda_hip/latent_kernels.hpp"
#include "flash_config.hpp"
#include "fragment_layout.hpp"
#include "sm80_primitives.cuh"

namespace mla::cuda_flash::projection {

inline constexpr int warps = 4;                   // per block
inline constexpr int warp_rows = 16;              // tokens per warp: one m16 tile
inline constexpr int n_tiles = 8;                 // 8-column mma tiles per warp
inline constexpr int warp_columns = 8 * n_tiles;  // 64 output columns
inline constexpr int k_step = 16;
inline constexpr int block_rows = warps * warp_rows;

using MLA_GPU_NAMESPACE::latent_kernel::ProjectParams;

// T: __nv_bfloat16 or __half, the operands' type and the compute dtype Out;
// W: kv_b_proj's dtype.
template <class T, DType W, DType Out>
__global__ void project_mma_kernel(const ProjectParams p) {
  using WStorage = typename MLA_GPU_NAMESPACE::Element<W>::Storage;
  const int lane = static_cast<int>(threadIdx.x) % warp_threads;
  const int warp = static_cast<int>(threadIdx.x) / warp_threads;
  const std::int64_t t0 = (static_cast<std::int64_t>(blockIdx.x) * warps + warp) * warp_rows;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.y) * warp_columns;
  if (t0 >= p.tokens) return;  // the whole warp: its mma calls stay collective
  const int g = lane / 4;
  const int t = lane % 4;
  const auto* weight = static_cast<const WStorage*>(p.weight);
  const auto latent = [&](int row, std::int64_t k) {
    const std::int64_t token = t0 + row;
    if (token >= p.tokens || k >= p.latent_dim) return 0.0f;
    const std::int64_t at = token * p.latents_stride[0] + k * p.latents_stride[1];
    if (p.latents_float) return sm80::load_global(static_cast<const float*>(p.latents) + at);
    using OutStorage = typename MLA_GPU_NAMESPACE::Element<Out>::Storage;
    return MLA_GPU_NAMESPACE::Element<Out>::load(sm80::load_global(static_cast<const OutStorage*>(p.latents) + at));
  };
  const auto w = [&](int col, std::int64_t k) {
    const std::int64_t c = c0 + col;
    return c < p.columns && k < p.latent_dim ? MLA_GPU_NAMESPACE::Element<W>::load(sm80::load_global(
                                                   &weight[c * p.weight_stride[0] + k * p.weight_stride[1]]))
                                             : 0.0f;
  };
  const sm80::Pack2<T> pack;
  float acc[n_tiles][4] = {};
  for (std::int64_t k0 = 0; k0 < p.latent_dim; k0 += k_step) {
    // A (16 tokens x 16 k): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..).
    const std::int64_t ka = k0 + 2 * t;
    const std::int64_t kb = ka + 8;
    const std::uint32_t a[4] = {pack(latent(g, ka), latent(g, ka + 1)), pack(latent(g + 8, ka), latent(g + 8, ka + 1)),
                                pack(latent(g, kb), latent(g, kb + 1)), pack(latent(g + 8, kb), latent(g + 8, kb + 1))};
#pragma unroll
    for (int n = 0; n < n_tiles; ++n) {
      // B (16 k x 8 columns): b0 (k 2t..2t+1, column g), b1 (k 2t+8.., column g).
      const int col = n * 8 + g;
      sm80::mma_16816<T>(acc[n], a, pack(w(col, ka), w(col, ka + 1)), pack(w(col, kb), w(col, kb + 1)));
    }
  }
#pragma unroll
  for (int n = 0; n < n_tiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t token = t0 + layout::acc_row(lane, e);
      const std::int64_t column = c0 + n * 8 + layout::acc_col(lane, e);
      if (token < p.tokens && column < p.columns) {
        MLA_GPU_NAMESPACE::latent_kernel::store_projected<Out>(p, token, column, acc[n][e]);
      }
    }
  }
}

// Calls launch(kernel, how, params) with the instance for kv_b_proj's dtype
// and k's (bf16 or fp16; the caller sends float32 elsewhere).
template <class Launch>
void project_mma_with(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k, const TensorView& v,
                      Launch&& launch) {
  namespace lk = MLA_GPU_NAMESPACE::latent_kernel;
  const ProjectParams params = lk::project_params(latents, kv_b_proj, k, v);
  if (params.tokens == 0 || params.columns == 0) return;
  lk::LatentLaunch how = lk::project_grid(params, block_rows, warp_columns);
  how.block_x = warps * warp_threads;
  how.name = lk::kernel_name("project_mma", kv_b_proj.dtype, k.dtype);
  lk::with_dtype(kv_b_proj.dtype, [&](auto w_type) {
    if (k.dtype == DType::bfloat16) {
      launch(&project_mma_kernel<__nv_bfloat16, w_type(), DType::bfloat16>, how, params);
    } else if (k.dtype == DType::float16) {
      launch(&project_mma_kernel<__half, w_type(), DType::float16>, how, params);
    } else {
      raise(ErrorCategory::internal, "project_mma: k must be bfloat16 or float16, got " + k.describe());
    }
  });
}

}  // namespace mla::cuda_flash::projection
