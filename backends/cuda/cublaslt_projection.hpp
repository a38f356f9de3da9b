// The MLA step's up-projection through cuBLASLt, for bf16 and fp16 keys and
// values with kv_b_proj of the same dtype (projection_choice.hpp decides):
//
//   1. latents [T, L] float32 -> scratch [T, L] in the compute dtype
//      (convert_latents; the own kernel rounds its operands the same way);
//   2. two GEMMs batched over heads, fp32 accumulation, written straight
//      into the strided views the attention reads:
//        k[:, h, 0:P] = scratch . kv_b_proj[h*(P+V) .. +P]^T
//        v[:, h, :]   = scratch . kv_b_proj[h*(P+V)+P .. +V]^T
//      In cuBLASLt's column-major terms D_h [P, T] = op(A_h) . B, with A_h
//      the weight rows read transposed (leading dim: kv_b_proj's row stride),
//      B the scratch shared by every head (batch stride 0) and D_h the
//      head's columns of k (leading dim: k's token stride, batch stride: its
//      head stride). k's rope columns are left alone.
//
// Chosen once and kept (per device, per shape and layout, not per token
// count): the cuBLASLt handle, the matmul descriptors and one algorithm from
// cublasLtMatmulAlgoGetHeuristic. The algorithm is asked for a fixed token
// count and reused for every count, without split-K (a workspace only when
// one is lent, below), so a token's keys and values are one fp32 sum over the
// latent index in the same order however many tokens share the call
// (docs/contract.md §6).
//
// Memory: a call runs in passes of at most 4096 tokens (MLA_CUBLASLT_PASS_TOKENS)
// through one scratch of that many rows of L elements of the compute dtype
// (4 MiB for L = 512), followed by the cuBLASLt workspace
// (MLA_CUBLASLT_WORKSPACE_MIB, default none), owned here and allocated on
// the queue by the first call (again only for a wider L or another device).
// Both variables are read with the first call. Capturing a step in a CUDA
// graph therefore needs one projection on the backend before the capture,
// which also creates the handle and chooses the algorithm.
#pragma once

#include <memory>

#include "mla/backend/latents.hpp"

namespace mla::cuda_flash {

class CublasLtProjection {
 public:
  CublasLtProjection();
  ~CublasLtProjection();
  CublasLtProjection(const CublasLtProjection&) = delete;
  CublasLtProjection& operator=(const CublasLtProjection&) = delete;

  // Enqueues the conversion and both GEMMs on `queue`'s stream (a borrowed
  // stream too). The arguments passed check_latent_projection and
  // choose_projection chose cuBLASLt for them. Raises Error(device) naming
  // the cuBLASLt or CUDA call that failed, Error(not_supported) when cuBLASLt
  // has no algorithm for the shape.
  void project(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
               const TensorView& v);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mla::cuda_flash
