// Arguments of one flash-attention kernel launch, shared by CUDA_FLASH and
// HIP_FLASH: filled by the backend (plain C++) and passed by value to the
// kernel. Strides are in elements; the last dim of q, k, v and out is
// contiguous and every row starts 16-byte aligned (the backend checks).
#pragma once

#include <cstdint>

#include "cuda_hip/key_mask.hpp"
#include "cuda_hip/work_schedule.hpp"
#include "mla/detail/host_device.hpp"

namespace mla::gpu {

// One descale of float8_e4m3 inputs (docs/contract.md §4): `value` times,
// when `values` is set, the float32 read there (device memory, when the
// kernel runs) at head * head_stride; head_stride 0: one value for every head.
struct KernelDescale {
  float value = 1.0f;
  const float* values = nullptr;
  std::int64_t head_stride = 0;

  MLA_HOST_DEVICE float at(int head) const { return values == nullptr ? value : value * values[head * head_stride]; }
};

struct FlashParams {
  const void* q = nullptr;  // [Nq, H, dqk]; strides below in elements of q's dtype
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
  // Sequences: cu_seqlens_q and cu_seqlens_k hold batch_size + 1 entries.
  // HOPPER_FLASH's e4m3 launch sizes its transposed V by it.
  std::int32_t batch_size = 0;
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

  // q, k and v are float8_e4m3 bytes (the kernel's type then names the
  // output), each value standing for itself times its head's descale.
  bool e4m3_inputs = false;
  KernelDescale q_descale, k_descale, v_descale;

  // docs/contract.md §12: the keys each query sees beyond causality, and
  // the sinks (key_mask.hpp). Default: none.
  KernelMask mask;

  // Split-KV (cuda_hip/split_kv.hpp): with num_splits > 1 every (work item,
  // head) runs as num_splits blocks over consecutive ranges of its key tiles
  // (gpu::split_key_tiles), each writing its normalised output and LSE as
  // float32 partials instead of out and lse; the vendor's launch then merges
  // them into out and lse (split_merge_kernel.hpp), and applies the sinks.
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
