// The MLA step's up-projection on oneDNN's GEMM, for the KOKKOS backend
// (projection.cpp decides when). Compiled only in builds that found oneDNN
// (cmake/MlaOneDnn.cmake).
#pragma once

#include <cstdint>
#include <string>

#include "mla/tensor.hpp"

namespace mla::kokkos {

// Tokens per oneDNN GEMM call: every call has this many rows (the last block
// of a projection is padded with zero rows), so every token goes through the
// same GEMM shape whatever the number of tokens around it.
inline constexpr std::int64_t onednn_block_tokens = 256;

// Projects on oneDNN, with arguments that passed check_latent_projection:
// keys and values of float32 (latents and weights in fp32) or bfloat16
// (latents and weights rounded to bf16), fp32 accumulation, each block of
// keys and values computed into the calling thread's scratch and copied into
// k's and v's rows (k, v with unit stride along their last dimension). Returns "" when done, else why oneDNN could not
// serve the call (dtype, layout, a oneDNN error); the outputs are then
// incomplete and the caller must compute them another way.
std::string project_latents_onednn(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                   const TensorView& v);

}  // namespace mla::kokkos
