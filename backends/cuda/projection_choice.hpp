// Which GEMM runs the MLA step's up-projection for CUDA_FLASH and
// HOPPER_FLASH on an NVIDIA GPU: one pure host function over the call's
// dtypes, layouts and the MLA_CUDA_PROJECTION override, asked by every
// project_latents call (backends/cuda/projector.cpp) and by the host tests.
//
//   float32 keys and values          the SIMT kernel (cuda_hip/latent_kernels.hpp):
//                                    no tensor-core path takes fp32 operands
//   bf16/fp16, kv_b_proj of the      cuBLASLt (cublaslt_projection.hpp), unless
//   same dtype, layouts it can name  MLA_CUDA_PROJECTION=own
//   bf16/fp16 otherwise              the own tensor-core kernel (projection_kernel.cuh):
//                                    it converts float32 or fp8 weights as it loads them
//
// MLA_CUDA_PROJECTION=cublaslt insists: where cuBLASLt cannot serve a bf16 or
// fp16 call, the call is refused (Error(not_supported)) instead of silently
// timing the other kernel. Whether cuBLASLt has an algorithm for a shape is
// known only on the device: without one, the projector falls back to the own
// kernel (or refuses, under =cublaslt). The GPU emulator always runs the own
// kernel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace mla::cuda_flash {

enum class ProjectionPath { cublaslt, tensor_cores, simt };

inline std::string_view projection_path_name(ProjectionPath path) {
  switch (path) {
    case ProjectionPath::cublaslt:
      return "cuBLASLt";
    case ProjectionPath::tensor_cores:
      return "own tensor-core kernel";
    case ProjectionPath::simt:
      return "SIMT kernel";
  }
  return "?";
}

// The environment variable's values: unset or empty (automatic), "own", "cublaslt".
enum class ProjectionOverride { automatic, own, cublaslt };
inline constexpr const char* projection_env = "MLA_CUDA_PROJECTION";

// `text`: the variable's value, null when unset. Raises Error(invalid_argument)
// naming the variable for anything else.
inline ProjectionOverride parse_projection_override(const char* text) {
  const std::string_view value = text == nullptr ? std::string_view{} : std::string_view{text};
  if (value.empty()) return ProjectionOverride::automatic;
  if (value == "own") return ProjectionOverride::own;
  if (value == "cublaslt") return ProjectionOverride::cublaslt;
  raise(ErrorCategory::invalid_argument, std::string(projection_env) + "=" + std::string(value) +
                                             ": expected own or cublaslt (or unset: cuBLASLt where it serves)");
}

struct ProjectionChoice {
  ProjectionPath path = ProjectionPath::simt;
  // Why not cuBLASLt, when the path is another; empty for cuBLASLt.
  std::string reason;
  // MLA_CUDA_PROJECTION=cublaslt for a call cuBLASLt cannot serve (`reason` says why).
  bool refused = false;
};

// Why cuBLASLt's matrix layouts cannot name these operands (empty: they can).
// The GEMMs read kv_b_proj as column-major [L, rows] with leading dimension
// its row stride, and write each head's keys (values) as a column-major
// [P, T] (or [V, T]) matrix with leading dimension the token stride, batched
// over heads with the head stride. Float32 latents are converted into
// contiguous scratch first, so their strides are free; latents in the
// compute dtype are read in place, as column-major [L, T] with leading
// dimension their token stride.
inline std::string cublaslt_layout_gap(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                       const TensorView& v) {
  const std::int64_t latent = latents.size(1), heads = k.size(1);
  const std::int64_t p = kv_b_proj.size(0) / heads - v.size(2);
  if (latents.dtype != DType::float32 && (latents.stride[1] != 1 || latents.stride[0] < latent)) {
    return "latents in the compute dtype are not row-major with contiguous rows: " + latents.describe();
  }
  if (kv_b_proj.stride[1] != 1 || kv_b_proj.stride[0] < latent) {
    return "kv_b_proj is not row-major with contiguous rows: " + kv_b_proj.describe();
  }
  const auto columns_gap = [](const TensorView& view, const char* name, std::int64_t rows) -> std::string {
    if (view.stride[2] != 1 || view.stride[0] < rows || view.stride[1] < 0) {
      return std::string(name) +
             " is not contiguous in its last dim with non-negative token and head strides: " + view.describe();
    }
    return {};
  };
  if (std::string gap = columns_gap(k, "k", p); !gap.empty()) return gap;
  return columns_gap(v, "v", v.size(2));
}

// The path for a call whose arguments passed check_latent_projection.
inline ProjectionChoice choose_projection(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                          const TensorView& v, ProjectionOverride how) {
  if (k.dtype == DType::float32) {
    return {ProjectionPath::simt, "float32 keys and values keep fp32 operands (SIMT)", false};
  }
  if (how == ProjectionOverride::own) {
    return {ProjectionPath::tensor_cores, std::string(projection_env) + "=own", false};
  }
  std::string gap;
  if (kv_b_proj.dtype != k.dtype) {
    gap = "kv_b_proj is " + std::string(dtype_name(kv_b_proj.dtype)) + ", not the compute dtype " +
          std::string(dtype_name(k.dtype));
  } else {
    gap = cublaslt_layout_gap(latents, kv_b_proj, k, v);
  }
  if (gap.empty()) return {ProjectionPath::cublaslt, {}, false};
  return {ProjectionPath::tensor_cores, gap, how == ProjectionOverride::cublaslt};
}

}  // namespace mla::cuda_flash
