// The MLA step's up-projection for CUDA_FLASH and HOPPER_FLASH
// (PrefillBackend::project_latents): cuBLASLt, the own tensor-core kernel or
// the SIMT kernel, as choose_projection (projection_choice.hpp) says per call.
#pragma once

#include <cstdint>
#include <memory>

#include "cuda_hip/gpu_flash_backend.hpp"
#include "mla/backend/latents.hpp"

namespace mla::cuda_flash {

// The own kernels: tensor cores (projection_kernel.cuh) for bf16 and fp16
// keys and values, the shared SIMT kernel (cuda_hip/latent_kernels.hpp) for
// float32. Enqueues one kernel on `queue`'s stream; the arguments must have
// passed check_latent_projection.
void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                     const TensorView& v);

// latents [T, L] float32 (any strides) into `out`, contiguous [T, L] of
// `dtype` (bfloat16 or float16), rounded to nearest even as the own kernel
// rounds its operands. One kernel on `queue`'s stream.
void convert_latents(Queue& queue, const TensorView& latents, void* out, DType dtype);

// Sets *sum (device memory) to a fingerprint of the bits of `view`, a 3-d
// view of 2-byte values (any strides): two views of one shape with equal
// bits give equal sums, different ones almost surely not. Two operations on
// `queue`'s stream.
void fingerprint(Queue& queue, const TensorView& view, std::uint64_t* sum);

// A backend's projector (gpu::FlashVendor::make_projector). Reads
// MLA_CUDA_PROJECTION now, once: Error(invalid_argument) for a value other
// than own or cublaslt.
std::unique_ptr<gpu::LatentProjector> make_projector();

}  // namespace mla::cuda_flash
