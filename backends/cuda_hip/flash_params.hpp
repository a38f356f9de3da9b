// Arguments of one flash-attention kernel launch, shared by CUDA_FLASH and
// HIP_FLASH: filled by the backend (plain C++) and passed by value to the
// kernel. Strides are in elements; the last dim of q, k, v and out is
// contiguous and every row starts 16-byte aligned (the backend checks).
#pragma once

#include <cstdint>

#include "cuda_hip/work_schedule.hpp"

namespace mla::gpu {

struct FlashParams {
  const void* q = nullptr;  // [Nq, H, dqk]
  const void* k = nullptr;  // [Nk, H, dqk]
  const void* v = nullptr;  // [Nk, H, dv]
  void* out = nullptr;      // [Nq, H, dv] in q's dtype, or float8_e4m3 when out_fp8
  float* lse = nullptr;     // [H, Nq] natural log, or null when not requested
  std::int64_t q_row_stride = 0;
  std::int64_t q_head_stride = 0;
  std::int64_t k_row_stride = 0;
  std::int64_t k_head_stride = 0;
  std::int64_t v_row_stride = 0;
  std::int64_t v_head_stride = 0;
  std::int64_t out_row_stride = 0;
  std::int64_t out_head_stride = 0;
  std::int64_t lse_head_stride = 0;
  std::int64_t lse_token_stride = 0;

  // Rows (tokens) of q and of k / v: the extent HOPPER_FLASH's tensor maps
  // describe (TMA zero-fills boxes past it).
  std::int64_t q_tokens = 0;
  std::int64_t k_tokens = 0;

  const std::int32_t* cu_seqlens_q = nullptr;  // [B+1], device
  const std::int32_t* cu_seqlens_k = nullptr;  // [B+1], device
  const gpu::WorkItem* work = nullptr;         // [num_work], heaviest first, device; null: see tiles_per_seq
  std::int32_t num_work = 0;
  // Without a work list: query tiles per sequence (gpu::work_item), and
  // num_work is batch size * tiles_per_seq.
  std::int32_t tiles_per_seq = 0;
  std::int32_t num_heads = 0;
  // Heads per L2 group of the block order (gpu::head_tile); 0: all heads.
  // The CUDA kernel reads it; the HIP kernel's grid has heads in its y.
  std::int32_t head_group = 0;
  // Whether each query sees only keys up to its diagonal. The HIP kernel reads
  // it; the CUDA kernel is instantiated per causality and the dispatch picks.
  bool causal = false;

  float scale_log2 = 0.0f;  // softmax scale * log2(e): scores go straight to exp2
  bool out_fp8 = false;
  float out_scale = 1.0f;  // fp8 output is saturate(out / out_scale)
  // When set, the scale is read from here (device memory) instead of out_scale.
  const float* out_scale_ptr = nullptr;

  // Split-KV (cuda_hip/split_kv.hpp): with num_splits > 1 every (work item,
  // head) runs as num_splits blocks over consecutive ranges of its key tiles
  // (gpu::split_key_tiles), each writing its normalised output and LSE as
  // float32 partials instead of out and lse; the vendor's launch then merges
  // them into out and lse (split_merge_kernel.hpp).
  std::int32_t num_splits = 1;
  float* partial_out = nullptr;  // [num_splits, q_tokens, H, dv]
  float* partial_lse = nullptr;  // [num_splits, H, q_tokens]
};

// Two floats stored as one 8-byte access: the CUDA kernels write their
// split-KV partial output (partial_out) in pairs of adjacent dims.
struct alignas(8) FloatPair {
  float lo;
  float hi;
};

}  // namespace mla::gpu
