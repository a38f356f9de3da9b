// The MLA step's up-projection through cuBLASLt, for bf16 and fp16 keys and
// values with kv_b_proj of the same dtype (projection_choice.hpp decides):
//
//   1. latents [T, L] in the compute dtype are read in place (what the GPU
//      backends' step passes: PrefillBackend::latent_dtype); float32 ones
//      are converted into scratch first, in passes (convert_latents; the
//      own kernel rounds its operands the same way);
//   2. two GEMMs batched over heads, fp32 accumulation, written straight
//      into the strided views the attention reads:
//        k[:, h, 0:P] = latents . kv_b_proj[h*(P+V) .. +P]^T
//        v[:, h, :]   = latents . kv_b_proj[h*(P+V)+P .. +V]^T
//      In cuBLASLt's column-major terms D_h [P, T] = op(A_h) . B, with A_h
//      the weight rows read transposed (leading dim: kv_b_proj's row stride),
//      B the latents shared by every head (batch stride 0) and D_h the
//      head's columns of k (leading dim: k's token stride, batch stride: its
//      head stride). k's rope columns are left alone.
//
// Chosen once and kept (per device, per shape and layout, not per token
// count): the cuBLASLt handle, the matmul descriptors and the heuristic's
// algorithms without split-K for a fixed token count (a workspace only when
// one is lent, below). The first call with a pass of at least 4096 tokens
// (and not under graph capture) times them on its own operands and keeps
// the fastest of those whose output has the first algorithm's bits (a
// fingerprint of the output on the device), then uses it for every count:
// a token's keys and values are one fp32 sum over the latent index in the
// same order however many tokens share the call, and the timing never
// changes a result (docs/contract.md §6). That call waits for the device.
//
// Memory: one scratch owned here, allocated on the queue by the first call
// (again only for a wider L, another device or the first float32 latents):
// 256 bytes of fingerprints, the cuBLASLt workspace (MLA_CUBLASLT_WORKSPACE_MIB,
// default none) and, for float32 latents, passes of at most 16384 tokens
// (MLA_CUBLASLT_PASS_TOKENS) of L elements of the compute dtype (16 MiB for
// L = 512). Both variables are read with the first call. Capturing a step
// in a CUDA graph therefore needs one projection on the backend before the
// capture, which also creates the handle and chooses the algorithm.
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
