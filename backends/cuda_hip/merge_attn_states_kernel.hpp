// The LSE merge kernel and the host planning around it (vector width, grid
// size, dtype dispatch), shared by the CUDA and HIP builds and the GPU
// emulator: each supplies only the launch itself (merge_attn_states.cu, or
// tests/support/simt/merge_emulated.cpp).
//
// One pass over [tokens, heads, V]: each thread merges a run of `Vec`
// elements of one (token, head) row. When all three outputs are contiguous in
// the last dim and 16-byte aligned, a run is one 16-byte load per input;
// otherwise Vec is 1 and every stride is honoured. Indexing is 64-bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "element.hpp"
#include "gpu_device.hpp"
#include "gpu_namespace.hpp"
#include "mla/backend.hpp"
#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"
#include "softmax.hpp"

namespace mla::MLA_GPU_NAMESPACE::merge_kernel {

struct MergeKernelParams {
  const void* prefix_out;   // [N, H, V]
  const void* suffix_out;   // [N, H, V]
  void* out;                // [N, H, V]
  const float* prefix_lse;  // [H, N]
  const float* suffix_lse;  // [H, N]
  float* out_lse;           // [H, N] or null
  std::int64_t tokens = 0;
  std::int64_t heads = 0;
  std::int64_t dim = 0;
  std::int64_t prefix_stride[3] = {};
  std::int64_t suffix_stride[3] = {};
  std::int64_t out_stride[3] = {};
  std::int64_t prefix_lse_stride[2] = {};
  std::int64_t suffix_lse_stride[2] = {};
  std::int64_t out_lse_stride[2] = {};
  std::int64_t copy_from_token = 0;      // tokens at or past this copy the suffix
  float out_scale = 1.0f;                // divides the output before fp8 conversion
  const float* out_scale_ptr = nullptr;  // when set, the scale is read here (device memory)
  const float* sinks = nullptr;          // [H] at head * sinks_stride (§12); null: none
  std::int64_t sinks_stride = 0;

  // The fp8 scale, read when the kernel runs (graph replays see updates).
  // (A product, not a select between two addresses, which could put the
  // parameters in local memory; out_scale is 1 when the pointer is set.)
  MLA_DEVICE float scale() const { return out_scale * (out_scale_ptr != nullptr ? *out_scale_ptr : 1.0f); }
};

// Vec elements moved as one aligned access.
template <class T, int Vec>
struct alignas(sizeof(T) * Vec) Pack {
  T value[Vec];
};

// Sinks: the merge applies p.sinks (docs/contract.md §12); only those
// instantiations read them.
template <DType In, DType Out, int Vec, bool Sinks = false>
__global__ void merge_attn_states_kernel(const MergeKernelParams p) {
  using InStorage = typename Element<In>::Storage;
  using OutStorage = typename Element<Out>::Storage;
  using InPack = Pack<InStorage, Vec>;
  using OutPack = Pack<OutStorage, Vec>;
  const std::int64_t runs = p.dim / Vec;  // the host picks Vec dividing dim
  const std::int64_t total = p.tokens * p.heads * runs;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < total;
       index += step) {
    const std::int64_t run = index % runs;
    const std::int64_t row = index / runs;
    const std::int64_t head = row % p.heads;
    const std::int64_t token = row / p.heads;
    const std::int64_t d = run * Vec;
    const float suffix_lse = p.suffix_lse[head * p.suffix_lse_stride[0] + token * p.suffix_lse_stride[1]];
    const auto* suffix = static_cast<const InStorage*>(p.suffix_out) + token * p.suffix_stride[0] +
                         head * p.suffix_stride[1] + d * p.suffix_stride[2];
    auto* out =
        static_cast<OutStorage*>(p.out) + token * p.out_stride[0] + head * p.out_stride[1] + d * p.out_stride[2];
    InPack s_in;
    OutPack o;
    float out_lse = 0.0f;
    // §12: the merged row's share left by the sink (1 without sinks).
    const float sink = Sinks ? p.sinks[head * p.sinks_stride] : 0.0f;
    if (token >= p.copy_from_token) {
      // Tokens without context: the prefix is not read at all, it may hold
      // anything; with sinks, neither is a suffix without keys (output 0).
      out_lse = suffix_lse;
      const float share = Sinks ? gpu::sink_factor(suffix_lse, sink) : 1.0f;
      if (share == 0.0f) {
        s_in = InPack{};
      } else if constexpr (Vec > 1) {
        s_in = *reinterpret_cast<const InPack*>(suffix);
      } else {
        s_in.value[0] = suffix[0];
      }
#pragma unroll
      for (int i = 0; i < Vec; ++i) {
        const float value = Element<In>::load(s_in.value[i]) * share;  // share 1 without sinks: exact
        if constexpr (Out == DType::float8_e4m3) {
          o.value[i] = Element<Out>::store(value / p.scale());
        } else {
          o.value[i] = Element<Out>::store(value);
        }
      }
    } else {
      const float prefix_lse = p.prefix_lse[head * p.prefix_lse_stride[0] + token * p.prefix_lse_stride[1]];
      const gpu::MergeWeights w = gpu::merge_weights(prefix_lse, suffix_lse);
      out_lse = w.lse;
      const float share = Sinks ? gpu::sink_factor(w.lse, sink) : 1.0f;
      const auto* prefix = static_cast<const InStorage*>(p.prefix_out) + token * p.prefix_stride[0] +
                           head * p.prefix_stride[1] + d * p.prefix_stride[2];
      InPack p_in;
      if constexpr (Vec > 1) {
        p_in = *reinterpret_cast<const InPack*>(prefix);
        s_in = *reinterpret_cast<const InPack*>(suffix);
      } else {
        p_in.value[0] = prefix[0];
        s_in.value[0] = suffix[0];
      }
#pragma unroll
      for (int i = 0; i < Vec; ++i) {
        // A side of weight 0 (no keys) contributes exactly nothing, even if
        // its output holds NaN or inf.
        float value = 0.0f;
        if (w.prefix != 0.0f) value += Element<In>::load(p_in.value[i]) * w.prefix;
        if (w.suffix != 0.0f) value += Element<In>::load(s_in.value[i]) * w.suffix;
        if constexpr (Sinks) value *= share;
        if constexpr (Out == DType::float8_e4m3) {
          o.value[i] = Element<Out>::store(value / p.scale());
        } else {
          o.value[i] = Element<Out>::store(value);
        }
      }
    }
    if constexpr (Vec > 1) {
      *reinterpret_cast<OutPack*>(out) = o;
    } else {
      out[0] = o.value[0];
    }
    if (p.out_lse != nullptr && run == 0) {
      p.out_lse[head * p.out_lse_stride[0] + token * p.out_lse_stride[1]] = out_lse;
    }
  }
}

inline bool aligned(const void* ptr, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(ptr) % bytes == 0; }

// Whether `view` ([N, H, V]) can be read in runs of `vec` elements of `element_bytes`.
inline bool vector_friendly(const TensorView& view, std::int64_t vec, std::size_t element_bytes) {
  return view.stride[2] == 1 && view.stride[0] % vec == 0 && view.stride[1] % vec == 0 &&
         aligned(view.data, static_cast<std::size_t>(vec) * element_bytes);
}

// What one launch needs besides the kernel and its parameters.
struct MergeLaunch {
  unsigned blocks = 0;
  unsigned threads = 0;
  std::string name;     // "merge_attn_states<bfloat16, bfloat16, 16-byte>"
  std::string context;  // sizes, for the launch error
};

template <DType In, DType Out, class Launch>
void plan(const MergeKernelParams& params, const MergeArgs& args, Launch& launch) {
  constexpr int vec = static_cast<int>(16 / sizeof(typename Element<In>::Storage));
  const bool vectorised = params.dim % vec == 0 &&
                          vector_friendly(args.prefix_out, vec, sizeof(typename Element<In>::Storage)) &&
                          vector_friendly(args.suffix_out, vec, sizeof(typename Element<In>::Storage)) &&
                          vector_friendly(args.out, vec, sizeof(typename Element<Out>::Storage));
  const std::int64_t runs = params.tokens * params.heads * (vectorised ? params.dim / vec : params.dim);
  constexpr int threads = 256;
  // A grid-stride loop covers the rest; 2^20 blocks saturate any current GPU.
  const std::int64_t blocks = std::min<std::int64_t>((runs + threads - 1) / threads, std::int64_t{1} << 20);
  MergeLaunch how;
  how.blocks = static_cast<unsigned>(blocks);
  how.threads = threads;
  how.name = std::string("merge_attn_states<") + std::string(dtype_name(In)) + ", " + std::string(dtype_name(Out)) +
             (vectorised ? ", 16-byte>" : ", scalar>");
  how.context = std::to_string(params.tokens) + " tokens, " + std::to_string(params.heads) + " heads, v_head_dim " +
                std::to_string(params.dim);
  const bool sinks = params.sinks != nullptr;
  if (vectorised) {
    launch(sinks ? &merge_attn_states_kernel<In, Out, vec, true> : &merge_attn_states_kernel<In, Out, vec, false>, how,
           params);
  } else {
    launch(sinks ? &merge_attn_states_kernel<In, Out, 1, true> : &merge_attn_states_kernel<In, Out, 1, false>, how,
           params);
  }
}

template <DType In, class Launch>
void plan_for_input(const MergeKernelParams& params, const MergeArgs& args, Launch& launch) {
  if (args.out.dtype == DType::float8_e4m3) {
    plan<In, DType::float8_e4m3>(params, args, launch);
  } else {
    plan<In, In>(params, args, launch);
  }
}

// Fills the kernel parameters from `args` (already checked) and calls
// launch(kernel, MergeLaunch, params) once, or not at all for an empty merge.
template <class Launch>
void merge_attn_states_with(const MergeArgs& args, Launch&& launch) {
  MergeKernelParams params;
  params.prefix_out = args.prefix_out.data;
  params.suffix_out = args.suffix_out.data;
  params.out = args.out.data;
  params.prefix_lse = static_cast<const float*>(args.prefix_lse.data);
  params.suffix_lse = static_cast<const float*>(args.suffix_lse.data);
  params.out_lse = args.out_lse.empty_view() ? nullptr : static_cast<float*>(args.out_lse.data);
  params.tokens = args.prefix_out.size(0);
  params.heads = args.prefix_out.size(1);
  params.dim = args.prefix_out.size(2);
  for (int i = 0; i < 3; ++i) {
    params.prefix_stride[i] = args.prefix_out.stride[static_cast<std::size_t>(i)];
    params.suffix_stride[i] = args.suffix_out.stride[static_cast<std::size_t>(i)];
    params.out_stride[i] = args.out.stride[static_cast<std::size_t>(i)];
  }
  for (int i = 0; i < 2; ++i) {
    params.prefix_lse_stride[i] = args.prefix_lse.stride[static_cast<std::size_t>(i)];
    params.suffix_lse_stride[i] = args.suffix_lse.stride[static_cast<std::size_t>(i)];
    params.out_lse_stride[i] = args.out_lse.empty_view() ? 0 : args.out_lse.stride[static_cast<std::size_t>(i)];
  }
  params.copy_from_token = args.prefill_tokens_with_context.value_or(params.tokens);
  params.out_scale = args.out_scale ? args.out_scale->value : 1.0f;
  params.out_scale_ptr = args.out_scale ? args.out_scale->device : nullptr;
  if (!args.sinks.empty_view()) {
    params.sinks = static_cast<const float*>(args.sinks.data);
    params.sinks_stride = args.sinks.stride[0];
  }
  if (params.tokens == 0 || params.heads == 0 || params.dim == 0) return;

  switch (args.prefix_out.dtype) {
    case DType::float32:
      plan_for_input<DType::float32>(params, args, launch);
      break;
    case DType::float16:
      plan_for_input<DType::float16>(params, args, launch);
      break;
    case DType::bfloat16:
      plan_for_input<DType::bfloat16>(params, args, launch);
      break;
    case DType::float8_e4m3:
      raise(ErrorCategory::invalid_argument, "merge: prefix_out must not be float8_e4m3");
  }
}

}  // namespace mla::MLA_GPU_NAMESPACE::merge_kernel
