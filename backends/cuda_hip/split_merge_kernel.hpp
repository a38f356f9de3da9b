// The merge of a split launch's partials (split-KV, cuda_hip/split_kv.hpp):
// for every (token, head) row, the float32 partial outputs and LSEs of the
// num_splits key ranges folded in split order with the library's LSE merge
// (gpu::merge_weights, docs/contract.md §3) and written to the launch's out
// (q's dtype or fp8 e4m3) and LSE. Shared by the CUDA and HIP builds and the
// GPU emulator: each supplies only the launch itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "element.hpp"
#include "flash_params.hpp"
#include "gpu_device.hpp"
#include "gpu_namespace.hpp"
#include "merge_attn_states_kernel.hpp"
#include "mla/tensor.hpp"
#include "softmax.hpp"

namespace mla::MLA_GPU_NAMESPACE::split_merge {

// Output elements one thread merges: dv is a multiple of 64, and out rows
// are 16-byte aligned, so a run is one aligned access of each partial.
inline constexpr int run_elements = 4;

template <DType Out>
__global__ void merge_splits_kernel(const gpu::FlashParams p, std::int64_t dim) {
  using Storage = typename Element<Out>::Storage;
  using InPack = merge_kernel::Pack<float, run_elements>;
  using OutPack = merge_kernel::Pack<Storage, run_elements>;
  const std::int64_t runs = dim / run_elements;
  const std::int64_t heads = p.num_heads;
  const std::int64_t total = p.q_tokens * heads * runs;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < total;
       index += step) {
    const std::int64_t run = index % runs;
    const std::int64_t row = index / runs;  // token * heads + head
    const std::int64_t head = row % heads;
    const std::int64_t token = row / heads;
    float value[run_elements] = {};
    float lse = -INFINITY;
    for (int split = 0; split < p.num_splits; ++split) {
      const gpu::MergeWeights w = gpu::merge_weights(lse, p.partial_lse[(split * heads + head) * p.q_tokens + token]);
      const InPack in = *reinterpret_cast<const InPack*>(p.partial_out + (split * p.q_tokens * heads + row) * dim +
                                                         run * run_elements);
#pragma unroll
      for (int i = 0; i < run_elements; ++i) {
        // A side of weight 0 (no keys yet, or none in this range) adds exactly nothing.
        float merged = 0.0f;
        if (w.prefix != 0.0f) merged += value[i] * w.prefix;
        if (w.suffix != 0.0f) merged += in.value[i] * w.suffix;
        value[i] = merged;
      }
      lse = w.lse;
    }
    // §12: the partials hold no sink; the merged row takes it once.
    if (p.mask.sinks != nullptr) {
      const float factor = gpu::sink_factor(lse, p.mask.sinks[head * p.mask.sinks_stride]);
#pragma unroll
      for (int i = 0; i < run_elements; ++i) value[i] *= factor;
    }
    // As the attention kernels read a device-held fp8 scale: when the kernel runs.
    const float out_scale = p.out_scale * (p.out_fp8 && p.out_scale_ptr != nullptr ? *p.out_scale_ptr : 1.0f);
    OutPack out;
#pragma unroll
    for (int i = 0; i < run_elements; ++i) {
      if constexpr (Out == DType::float8_e4m3) {
        out.value[i] = Element<Out>::store(value[i] / out_scale);
      } else {
        out.value[i] = Element<Out>::store(value[i]);
      }
    }
    *reinterpret_cast<OutPack*>(static_cast<Storage*>(p.out) + token * p.out_row_stride + head * p.out_head_stride +
                                run * run_elements) = out;
    if (p.lse != nullptr && run == 0) p.lse[head * p.lse_head_stride + token * p.lse_token_stride] = lse;
  }
}

// Calls launch(kernel, merge_kernel::MergeLaunch, params, dim) once for a
// split launch of `params` (num_splits > 1, partials written) whose inputs
// are `dtype` and whose v head dim is `dim`; not at all without rows.
template <class Launch>
void merge_splits_with(const gpu::FlashParams& params, DType dtype, int dim, Launch&& launch) {
  const std::int64_t runs = params.q_tokens * params.num_heads * (dim / run_elements);
  if (runs == 0) return;
  constexpr int threads = 256;
  merge_kernel::MergeLaunch how;
  how.threads = threads;
  how.blocks = static_cast<unsigned>(std::min<std::int64_t>((runs + threads - 1) / threads, std::int64_t{1} << 20));
  const DType out = params.out_fp8 ? DType::float8_e4m3 : dtype;
  how.name = "merge_splits<" + std::string(dtype_name(out)) + ">";
  how.context = std::to_string(params.num_splits) + " splits, " + std::to_string(params.q_tokens) + " tokens, " +
                std::to_string(params.num_heads) + " heads, v_head_dim " + std::to_string(dim);
  if (out == DType::float8_e4m3) {
    launch(&merge_splits_kernel<DType::float8_e4m3>, how, params, static_cast<std::int64_t>(dim));
  } else if (out == DType::bfloat16) {
    launch(&merge_splits_kernel<DType::bfloat16>, how, params, static_cast<std::int64_t>(dim));
  } else {
    launch(&merge_splits_kernel<DType::float16>, how, params, static_cast<std::int64_t>(dim));
  }
}

}  // namespace mla::MLA_GPU_NAMESPACE::split_merge
