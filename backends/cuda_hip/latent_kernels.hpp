// The MLA step's gather and up-projection kernels (mla/latents.hpp) and the
// host planning around them (dtype dispatch, grid size; the projection's in
// latent_params.hpp), shared by the CUDA and HIP builds and the GPU emulator:
// each supplies only the launch (latents.cu, or
// tests/support/simt/latents_emulated.cpp).
//
// The projection is a plain SIMT kernel: each thread accumulates a 4 x 4
// block of (token, output column) in fp32 registers along the latent index,
// reading latents and weights straight from global memory. It is correct
// everywhere and deterministic; it is not a tensor-core GEMM.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "element.hpp"
#include "gpu_device.hpp"
#include "gpu_namespace.hpp"
#include "latent_params.hpp"
#include "mla/backend/latents.hpp"
#include "mla/detail/cache_decode.hpp"
#include "mla/error.hpp"

namespace mla::MLA_GPU_NAMESPACE::latent_kernel {

struct GatherParams {
  // Row t reads block b = slot / block_size, position s = slot % block_size,
  // with slot = slots[t] (cache) or t (new tokens, block_size 1).
  const void* latent = nullptr;  // element (b, s, l) at b*latent_block + s*latent_slot + l*latent_step
  const void* rope = nullptr;
  std::int64_t latent_block = 0, latent_slot = 0, latent_step = 0;
  std::int64_t rope_block = 0, rope_slot = 0, rope_step = 0;
  const std::int64_t* slots = nullptr;
  std::int64_t block_size = 1;
  // A grouped cache (docs/contract.md §13): `latent` points at byte records,
  // latent_block and latent_slot count bytes, every value is decoded.
  CacheFormat format = CacheFormat::plain;
  std::int64_t tokens = 0, latent_dim = 0, rope_dim = 0, heads = 0;
  float scale = 1.0f;
  void* latents = nullptr;    // [T, L]
  bool latents_float = true;  // float32, else k's dtype
  std::int64_t latents_stride[2] = {};
  void* k = nullptr;  // [T, H, P+R]: the rope key goes to columns rope_at..
  std::int64_t k_stride[3] = {};
  std::int64_t rope_at = 0;
};

// One thread per (row, value): latents get the latent values in float32 (or
// k's dtype), every head's k gets the rope values in k's dtype.
template <DType Src, DType K>
__global__ void gather_latents_kernel(const GatherParams p) {
  using SrcStorage = typename Element<Src>::Storage;
  using KStorage = typename Element<K>::Storage;
  const std::int64_t width = p.latent_dim + p.rope_dim;
  const std::int64_t total = p.tokens * width;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < total;
       index += step) {
    const std::int64_t t = index / width;
    const std::int64_t e = index % width;
    const std::int64_t slot = p.slots != nullptr ? p.slots[t] : t;
    const std::int64_t block = slot / p.block_size;
    const std::int64_t position = slot % p.block_size;
    float value = 0.0f;
    if (p.format != CacheFormat::plain) {
      const auto* record =
          static_cast<const std::uint8_t*>(p.latent) + block * p.latent_block + position * p.latent_slot;
      value = numeric::decode_cache_value(p.format, record, e);
    } else if (e < p.latent_dim) {
      const auto* src = static_cast<const SrcStorage*>(p.latent);
      value = Element<Src>::load(src[block * p.latent_block + position * p.latent_slot + e * p.latent_step]) * p.scale;
    } else {
      const auto* src = static_cast<const SrcStorage*>(p.rope);
      value =
          Element<Src>::load(src[block * p.rope_block + position * p.rope_slot + (e - p.latent_dim) * p.rope_step]) *
          p.scale;
    }
    if (e < p.latent_dim) {
      const std::int64_t at = t * p.latents_stride[0] + e * p.latents_stride[1];
      if (p.latents_float) {
        static_cast<float*>(p.latents)[at] = value;
      } else {
        static_cast<KStorage*>(p.latents)[at] = Element<K>::store(value);
      }
    } else {
      const std::int64_t r = e - p.latent_dim;
      const KStorage stored = Element<K>::store(value);
      auto* k = static_cast<KStorage*>(p.k) + t * p.k_stride[0] + (p.rope_at + r) * p.k_stride[2];
      for (std::int64_t h = 0; h < p.heads; ++h) k[h * p.k_stride[1]] = stored;
    }
  }
}

inline constexpr int project_tile = 4;      // tokens and columns per thread
inline constexpr int project_threads = 16;  // threads per block along each of x (columns) and y (tokens)

// Latent l of token `token`, in float32: the latents are float32 or Out.
template <DType Out>
MLA_DEVICE inline float latent_value(const ProjectParams& p, std::int64_t token, std::int64_t l) {
  const std::int64_t at = token * p.latents_stride[0] + l * p.latents_stride[1];
  if (p.latents_float) return static_cast<const float*>(p.latents)[at];
  return Element<Out>::load(static_cast<const typename Element<Out>::Storage*>(p.latents)[at]);
}

// Writes output column `column` of token `token` (projected_at).
template <DType Out>
MLA_DEVICE inline void store_projected(const ProjectParams& p, std::int64_t token, std::int64_t column, float value) {
  using OutStorage = typename Element<Out>::Storage;
  const ProjectedAt at = projected_at(p, token, column);
  static_cast<OutStorage*>(at.key ? p.k : p.v)[at.offset] = Element<Out>::store(value);
}

template <DType W, DType Out>
__global__ void project_latents_kernel(const ProjectParams p) {
  using WStorage = typename Element<W>::Storage;
  const std::int64_t t0 = (static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y) * project_tile;
  const std::int64_t c0 = (static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * project_tile;
  if (t0 >= p.tokens || c0 >= p.columns) return;
  const int rows = static_cast<int>(p.tokens - t0 < project_tile ? p.tokens - t0 : project_tile);
  const int cols = static_cast<int>(p.columns - c0 < project_tile ? p.columns - c0 : project_tile);
  const auto* weight = static_cast<const WStorage*>(p.weight);
  float acc[project_tile][project_tile] = {};
  for (std::int64_t l = 0; l < p.latent_dim; ++l) {
    float a[project_tile];
    float b[project_tile];
#pragma unroll
    for (int i = 0; i < project_tile; ++i) {
      // Rows and columns past the end repeat the last one; their sums are not stored.
      const std::int64_t t = t0 + (i < rows ? i : rows - 1);
      const std::int64_t c = c0 + (i < cols ? i : cols - 1);
      a[i] = latent_value<Out>(p, t, l);
      b[i] = Element<W>::load(weight[c * p.weight_stride[0] + l * p.weight_stride[1]]);
    }
#pragma unroll
    for (int i = 0; i < project_tile; ++i) {
#pragma unroll
      for (int j = 0; j < project_tile; ++j) acc[i][j] += a[i] * b[j];
    }
  }
  // Unrolled over the whole tile with guards, so that acc stays in registers
  // (loops bounded by rows and cols index it dynamically: a stack frame).
#pragma unroll
  for (int i = 0; i < project_tile; ++i) {
#pragma unroll
    for (int j = 0; j < project_tile; ++j) {
      if (i >= rows || j >= cols) continue;
      store_projected<Out>(p, t0 + i, c0 + j, acc[i][j]);
    }
  }
}

// Calls launch(kernel, how, params) with kernel<In, Out> for the run-time
// dtypes; outputs are never fp8 (check_latent_gather and
// check_latent_projection refuse it first).
template <template <DType, DType> class Kernel, class Params, class Launch>
void launch_for(const char* name, DType in, DType out, LatentLaunch how, const Params& params, Launch& launch) {
  how.name = kernel_name(name, in, out);
  with_dtype(in, [&](auto in_type) {
    with_dtype(out, [&](auto out_type) {
      if constexpr (out_type() == DType::float8_e4m3) {
        raise(ErrorCategory::invalid_argument, std::string(name) + ": outputs must not be float8_e4m3");
      } else {
        launch(Kernel<in_type(), out_type()>::function, how, params);
      }
    });
  });
}

template <DType Src, DType K>
struct GatherKernel {
  static constexpr auto function = &gather_latents_kernel<Src, K>;
};

// Fills the parameters from a checked gather (check_latent_gather) and calls
// launch once, or not at all when there are no rows.
template <class Launch>
void gather_latents_with(const LatentGather& gather, const TensorView& latents, const TensorView& k, Launch&& launch) {
  GatherParams params;
  params.tokens = gather.tokens;
  params.latent_dim = latents.size(1);
  params.heads = k.size(1);
  params.latents = latents.data;
  params.latents_float = latents.dtype == DType::float32;
  params.latents_stride[0] = latents.stride[0];
  params.latents_stride[1] = latents.stride[1];
  params.k = k.data;
  for (int i = 0; i < 3; ++i) params.k_stride[i] = k.stride[static_cast<std::size_t>(i)];
  DType source = gather.cache.dtype;
  if (gather.from_cache()) {
    const TensorView& cache = gather.cache;
    params.format = gather.format;
    params.rope_dim = numeric::cache_rope_width(gather.format, cache.size(2), params.latent_dim);
    params.latent = cache.data;
    params.rope = static_cast<const char*>(cache.data) +
                  params.latent_dim * cache.stride[2] * static_cast<std::int64_t>(dtype_size(cache.dtype));
    params.latent_block = params.rope_block = cache.stride[0];
    params.latent_slot = params.rope_slot = cache.stride[1];
    params.latent_step = params.rope_step = cache.stride[2];
    params.slots = gather.slots;
    params.block_size = cache.size(1);
    params.scale = gather.scale;
  } else {
    if (gather.kv_c.dtype != gather.k_pe.dtype) {
      raise(ErrorCategory::invalid_argument, "gather_latents: kv_c (" + gather.kv_c.describe() + ") and k_pe (" +
                                                 gather.k_pe.describe() + ") must share a dtype on a GPU");
    }
    source = gather.kv_c.dtype;
    params.rope_dim = gather.k_pe.size(1);
    params.latent = gather.kv_c.data;
    params.rope = gather.k_pe.data;
    params.latent_block = gather.kv_c.stride[0];
    params.latent_step = gather.kv_c.stride[1];
    params.rope_block = gather.k_pe.stride[0];
    params.rope_step = gather.k_pe.stride[1];
  }
  params.rope_at = k.size(2) - params.rope_dim;
  const std::int64_t total = params.tokens * (params.latent_dim + params.rope_dim);
  if (total == 0) return;
  LatentLaunch how;
  how.block_x = 256;
  // A grid-stride loop covers the rest; 2^20 blocks saturate any current GPU.
  how.grid_x = static_cast<unsigned>(std::min<std::int64_t>((total + 255) / 256, std::int64_t{1} << 20));
  how.context = std::to_string(params.tokens) + " rows of " + std::to_string(params.latent_dim) + " + " +
                std::to_string(params.rope_dim) + " values, " + std::to_string(params.heads) + " heads";
  launch_for<GatherKernel>("gather_latents", source, k.dtype, how, params, launch);
}

template <DType W, DType Out>
struct ProjectKernel {
  static constexpr auto function = &project_latents_kernel<W, Out>;
};

// Launches the SIMT projection for a checked projection, or nothing when
// there are no rows.
template <class Launch>
void project_latents_with(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                          const TensorView& v, Launch&& launch) {
  const ProjectParams params = project_params(latents, kv_b_proj, k, v);
  if (params.tokens == 0 || params.columns == 0) return;
  constexpr std::int64_t span = std::int64_t{project_threads} * project_tile;
  LatentLaunch how = project_grid(params, span, span);
  how.block_x = how.block_y = project_threads;
  launch_for<ProjectKernel>("project_latents", kv_b_proj.dtype, k.dtype, how, params, launch);
}

// --- The MLA step's FP8 attention mode: keys and values to e4m3 ---

// `to` = e4m3(`from` / s) for a [T, H, D] tensor, s = `scale` or, with
// `amax` set, the largest |from| / 448 (1 when all are 0) read from the
// float bits amax_kernel left there; block 0's thread 0 also writes that s
// to `descale`, the attention call's descale.
struct QuantiseParams {
  const void* from = nullptr;
  std::int64_t from_stride[3] = {};
  void* to = nullptr;  // float8_e4m3
  std::int64_t to_stride[3] = {};
  std::int64_t shape[3] = {};
  float scale = 1.0f;
  unsigned* amax = nullptr;  // the float bits of the largest |from|, or null: `scale`
  float* descale = nullptr;
};

inline constexpr float e4m3_largest = 448.0f;

MLA_HOST_DEVICE inline std::int64_t quantise_total(const QuantiseParams& p) {
  return p.shape[0] * p.shape[1] * p.shape[2];
}

// Element `index` (row-major over the shape) of `from`, in float32.
template <DType Src>
MLA_DEVICE inline float quantise_source(const QuantiseParams& p, std::int64_t index) {
  const std::int64_t d = index % p.shape[2];
  const std::int64_t h = index / p.shape[2] % p.shape[1];
  const std::int64_t t = index / (p.shape[1] * p.shape[2]);
  const auto* from = static_cast<const typename Element<Src>::Storage*>(p.from);
  return Element<Src>::load(from[t * p.from_stride[0] + h * p.from_stride[1] + d * p.from_stride[2]]);
}

// The largest |from| into *amax (zero before the launch): non-negative
// floats order as their bits, so an unsigned atomic max keeps it.
template <DType Src>
__global__ void amax_kernel(const QuantiseParams p) {
  const std::int64_t total = quantise_total(p);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  float largest = 0.0f;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const float value = fabsf(quantise_source<Src>(p, i));
    largest = value > largest ? value : largest;  // a NaN never wins: attention gives NaN from the byte anyway
  }
  unsigned bits = 0;
  memcpy(&bits, &largest, sizeof bits);
  if (bits != 0) atomicMax(p.amax, bits);
}

template <DType Src>
__global__ void quantise_kernel(const QuantiseParams p) {
  float scale = p.scale;
  if (p.amax != nullptr) {
    const unsigned bits = *p.amax;
    float largest = 0.0f;
    memcpy(&largest, &bits, sizeof largest);
    scale = largest > 0.0f ? largest / e4m3_largest : 1.0f;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && p.descale != nullptr) *p.descale = scale;
  const std::int64_t total = quantise_total(p);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  auto* to = static_cast<std::uint8_t*>(p.to);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const std::int64_t d = i % p.shape[2];
    const std::int64_t h = i / p.shape[2] % p.shape[1];
    const std::int64_t t = i / (p.shape[1] * p.shape[2]);
    to[t * p.to_stride[0] + h * p.to_stride[1] + d * p.to_stride[2]] =
        Element<DType::float8_e4m3>::store(quantise_source<Src>(p, i) / scale);
  }
}

template <DType Src, DType>
struct AmaxKernel {
  static constexpr auto function = &amax_kernel<Src>;
};

template <DType Src, DType>
struct QuantiseKernel {
  static constexpr auto function = &quantise_kernel<Src>;
};

// The FP8 attention mode's quantisation of `from` ([T, H, D], any float
// dtype) into `to` (float8_e4m3, same shape): with `scale`, one launch;
// without, amax_kernel into scratch[0] (zeroed by `zero` first) and the
// quantisation with s = amax / 448 written to scratch[1].
template <class Zero, class Launch>
void quantise_e4m3_with(const TensorView& from, const TensorView& to, std::optional<float> scale, float* scratch,
                        Zero&& zero, Launch&& launch) {
  QuantiseParams params;
  params.from = from.data;
  params.to = to.data;
  for (int i = 0; i < 3; ++i) {
    params.from_stride[i] = from.stride[static_cast<std::size_t>(i)];
    params.to_stride[i] = to.stride[static_cast<std::size_t>(i)];
    params.shape[i] = from.size(i);
  }
  params.descale = scratch + 1;
  if (scale) {
    params.scale = *scale;
  } else {
    params.amax = reinterpret_cast<unsigned*>(scratch);
    zero(scratch, sizeof(unsigned));
  }
  const std::int64_t total = quantise_total(params);
  LatentLaunch how;
  how.block_x = 256;
  how.grid_x = static_cast<unsigned>(
      std::max<std::int64_t>(1, std::min<std::int64_t>((total + 255) / 256, std::int64_t{1} << 16)));
  how.context = from.describe() + " to float8_e4m3";
  if (!scale && total > 0) launch_for<AmaxKernel>("amax_e4m3", from.dtype, from.dtype, how, params, launch);
  launch_for<QuantiseKernel>("quantise_e4m3", from.dtype, from.dtype, how, params, launch);
}

}  // namespace mla::MLA_GPU_NAMESPACE::latent_kernel
