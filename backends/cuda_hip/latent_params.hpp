// The host planning of the MLA step's up-projection kernels (the shared SIMT
// kernel of latent_kernels.hpp, CUDA's tensor-core kernel and HIP's MFMA
// kernel): their parameters, grid and dtype dispatch, and where an output
// column lands in k or v. No device header: the GPU emulator's clang compile
// of the HIP kernels includes it beside its own HIP device surface.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "gpu_namespace.hpp"
#include "mla/detail/host_device.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace mla::MLA_GPU_NAMESPACE::latent_kernel {

struct ProjectParams {
  const void* latents = nullptr;  // [T, L]
  bool latents_float = true;      // float32, else the keys' dtype
  std::int64_t latents_stride[2] = {};
  const void* weight = nullptr;  // [H*(P+V), L]
  std::int64_t weight_stride[2] = {};
  void* k = nullptr;  // [T, H, P+R]
  std::int64_t k_stride[3] = {};
  void* v = nullptr;  // [T, H, V]
  std::int64_t v_stride[3] = {};
  std::int64_t tokens = 0, columns = 0, latent_dim = 0;
  std::int64_t per_head = 0;  // P+V: weight rows of one head
  std::int64_t p = 0;         // the first P of them are key rows
};

// Where output column `column` of token `token` goes: head column / (P+V), a
// key column when the rest is below P, else a value column; `offset` counts
// elements from k's (or v's) data.
struct ProjectedAt {
  bool key;
  std::int64_t offset;
};

MLA_HOST_DEVICE inline ProjectedAt projected_at(const ProjectParams& p, std::int64_t token, std::int64_t column) {
  const std::int64_t head = column / p.per_head;
  const std::int64_t within = column % p.per_head;
  if (within < p.p) return {true, token * p.k_stride[0] + head * p.k_stride[1] + within * p.k_stride[2]};
  return {false, token * p.v_stride[0] + head * p.v_stride[1] + (within - p.p) * p.v_stride[2]};
}

// What one launch needs besides the kernel and its parameters.
struct LatentLaunch {
  unsigned grid_x = 1, grid_y = 1;
  unsigned block_x = 1, block_y = 1;
  std::string name;     // "gather_latents<float8_e4m3, bfloat16>"
  std::string context;  // sizes, for the launch error
};

inline std::string kernel_name(const char* kernel, DType a, DType b) {
  return std::string(kernel) + "<" + std::string(dtype_name(a)) + ", " + std::string(dtype_name(b)) + ">";
}

// Calls f(std::integral_constant<DType, D>{}) for the D of `dtype`, so that
// a run-time dtype picks a kernel instance.
template <class F>
void with_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32:
      return f(std::integral_constant<DType, DType::float32>{});
    case DType::float16:
      return f(std::integral_constant<DType, DType::float16>{});
    case DType::bfloat16:
      return f(std::integral_constant<DType, DType::bfloat16>{});
    case DType::float8_e4m3:
      return f(std::integral_constant<DType, DType::float8_e4m3>{});
  }
}

// The parameters of a checked projection (check_latent_projection).
inline ProjectParams project_params(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                    const TensorView& v) {
  ProjectParams params;
  params.latents = latents.data;
  params.latents_float = latents.dtype == DType::float32;
  params.latents_stride[0] = latents.stride[0];
  params.latents_stride[1] = latents.stride[1];
  params.weight = kv_b_proj.data;
  params.weight_stride[0] = kv_b_proj.stride[0];
  params.weight_stride[1] = kv_b_proj.stride[1];
  params.k = k.data;
  params.v = v.data;
  for (int i = 0; i < 3; ++i) {
    params.k_stride[i] = k.stride[static_cast<std::size_t>(i)];
    params.v_stride[i] = v.stride[static_cast<std::size_t>(i)];
  }
  params.tokens = latents.size(0);
  params.latent_dim = latents.size(1);
  params.columns = kv_b_proj.size(0);
  params.per_head = params.columns / k.size(1);
  params.p = params.per_head - v.size(2);
  return params;
}

// A grid of blocks covering `token_span` tokens by `column_span` output
// columns each; Error(not_supported) beyond the grid's limits.
inline LatentLaunch project_grid(const ProjectParams& params, std::int64_t token_span, std::int64_t column_span) {
  const std::int64_t token_blocks = (params.tokens + token_span - 1) / token_span;
  const std::int64_t column_blocks = (params.columns + column_span - 1) / column_span;
  if (token_blocks > 0x7fffffff || column_blocks > 65535) {
    raise(ErrorCategory::not_supported, "project_latents: " + std::to_string(params.tokens) + " tokens x " +
                                            std::to_string(params.columns) + " columns exceed one grid");
  }
  LatentLaunch how;
  how.grid_x = static_cast<unsigned>(token_blocks);
  how.grid_y = static_cast<unsigned>(column_blocks);
  how.context = std::to_string(params.tokens) + " tokens, " + std::to_string(params.columns) +
                " output columns, latent " + std::to_string(params.latent_dim);
  return how;
}

}  // namespace mla::MLA_GPU_NAMESPACE::latent_kernel
