// The latent gather and up-projection: their checks, and the host versions
// that PrefillBackend runs by default (REFERENCE, KOKKOS, plugins).
#include "mla/backend/latents.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/detail/cache_decode.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

[[noreturn]] void bad(const std::string& message) { raise(ErrorCategory::invalid_argument, message); }

void check_rank(const TensorView& view, const char* what, int rank) {
  if (view.empty_view() || view.rank != rank) {
    bad(std::string(what) + " must be a " + std::to_string(rank) + "-d tensor, got " +
        (view.empty_view() ? std::string("none") : view.describe()));
  }
  check_has_data(view, what);
}

void check_size(const TensorView& view, const char* what, int dim, std::int64_t expected) {
  if (view.size(dim) != expected) {
    bad(std::string(what) + " dimension " + std::to_string(dim) + " is " + std::to_string(view.size(dim)) +
        ", expected " + std::to_string(expected) + " (" + view.describe() + ")");
  }
}

bool float_dtype(DType dtype) { return dtype != DType::float8_e4m3; }

// float32, or k's bfloat16 / float16 where the backend takes latents in it.
void check_latent_dtype(const char* call, const TensorView& latents, const TensorView& k, bool compute_dtype_latents) {
  if (latents.dtype == DType::float32) return;
  const bool half = k.dtype == DType::bfloat16 || k.dtype == DType::float16;
  if (compute_dtype_latents && half && latents.dtype == k.dtype) return;
  bad(std::string(call) + ": latents must be float32" +
      (compute_dtype_latents ? " or k's dtype (bfloat16 or float16), got " : " on this backend, got ") +
      latents.describe() + " for k " + k.describe());
}

// The host versions dereference tensor pointers on the calling thread.
void require_host(const PrefillBackend& backend, const Queue& queue, const char* call) {
  require_queue_kind(backend.name(), call, {DeviceBackend::host}, queue);
}

float element(const TensorView& view, std::int64_t i0, std::int64_t i1, std::int64_t i2 = 0) {
  return load_as_float(view.data, view.dtype, view.offset(i0, i1, i2));
}

// A grouped cache: float8_e4m3 records of the format's bytes, contiguous
// within a record, holding L and R, with no per-tensor scale.
void check_cache_format(CacheFormat format, const TensorView& cache, std::int64_t latent, std::int64_t rope,
                        float scale) {
  if (format == CacheFormat::plain) return;
  const std::string name(cache_format_name(format));
  const std::int64_t bytes = cache_record_bytes(format);
  if (cache.dtype != DType::float8_e4m3 || cache.size(2) != bytes || cache.stride[2] != 1) {
    bad("gather_latents: a " + name + " cache is float8_e4m3 bytes [blocks, block_size, " + std::to_string(bytes) +
        "] with unit last stride; got " + cache.describe());
  }
  if (const std::string refusal = cache_format_refusal(format, latent, rope); !refusal.empty()) {
    bad("gather_latents: " + refusal);
  }
  if (scale != 1.0f) {
    bad("gather_latents: a " + name + " cache carries its own scales; scale must be 1, got " + std::to_string(scale));
  }
}

}  // namespace

void check_latent_gather(const Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k,
                         bool compute_dtype_latents) {
  const char* call = "gather_latents";
  if (gather.tokens < 0) bad(std::string(call) + ": tokens is negative (" + std::to_string(gather.tokens) + ")");
  check_rank(latents, "gather_latents: latents", 2);
  check_size(latents, "gather_latents: latents", 0, gather.tokens);
  check_rank(k, "gather_latents: k", 3);
  check_latent_dtype("gather_latents", latents, k, compute_dtype_latents);
  check_size(k, "gather_latents: k", 0, gather.tokens);
  if (!float_dtype(k.dtype)) bad("gather_latents: k must not be float8_e4m3 (" + k.describe() + ")");
  const std::int64_t latent = latents.size(1);
  std::int64_t rope = 0;
  if (gather.from_cache()) {
    check_rank(gather.cache, "gather_latents: cache", 3);
    if (gather.cache.size(1) < 1) bad("gather_latents: cache blocks hold no tokens (" + gather.cache.describe() + ")");
    rope = numeric::cache_rope_width(gather.format, gather.cache.size(2), latent);
    check_cache_format(gather.format, gather.cache, latent, rope, gather.scale);
    if (rope < 0) bad("gather_latents: cache rows are narrower than latents' " + std::to_string(latent) + " values");
    if (gather.tokens > 0 && gather.slots == nullptr) bad("gather_latents: cache rows without slots");
    if (!(gather.scale > 0)) bad("gather_latents: scale must be positive, got " + std::to_string(gather.scale));
    check_accessible(queue, gather.cache, "gather_latents: cache");
  } else {
    check_rank(gather.kv_c, "gather_latents: kv_c", 2);
    check_size(gather.kv_c, "gather_latents: kv_c", 0, gather.tokens);
    check_size(gather.kv_c, "gather_latents: kv_c", 1, latent);
    check_rank(gather.k_pe, "gather_latents: k_pe", 2);
    check_size(gather.k_pe, "gather_latents: k_pe", 0, gather.tokens);
    rope = gather.k_pe.size(1);
    if (!float_dtype(gather.kv_c.dtype) || !float_dtype(gather.k_pe.dtype)) {
      bad("gather_latents: kv_c and k_pe must be float tensors (" + gather.kv_c.describe() + ", " +
          gather.k_pe.describe() + ")");
    }
    check_accessible(queue, gather.kv_c, "gather_latents: kv_c");
    check_accessible(queue, gather.k_pe, "gather_latents: k_pe");
  }
  if (k.size(2) < rope) {
    bad("gather_latents: k's last dimension " + std::to_string(k.size(2)) + " cannot hold " + std::to_string(rope) +
        " rope values");
  }
  check_accessible(queue, latents, "gather_latents: latents");
  check_accessible(queue, k, "gather_latents: k");
}

void check_latent_projection(const Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                             const TensorView& k, const TensorView& v, bool compute_dtype_latents) {
  check_rank(latents, "project_latents: latents", 2);
  check_rank(k, "project_latents: k", 3);
  check_latent_dtype("project_latents", latents, k, compute_dtype_latents);
  check_rank(v, "project_latents: v", 3);
  check_rank(kv_b_proj, "project_latents: kv_b_proj", 2);
  const std::int64_t tokens = latents.size(0), heads = k.size(1);
  check_size(k, "project_latents: k", 0, tokens);
  check_size(v, "project_latents: v", 0, tokens);
  check_size(v, "project_latents: v", 1, heads);
  check_size(kv_b_proj, "project_latents: kv_b_proj", 1, latents.size(1));
  if (heads < 1 || kv_b_proj.size(0) % heads != 0 || kv_b_proj.size(0) / heads <= v.size(2) ||
      kv_b_proj.size(0) / heads - v.size(2) > k.size(2)) {
    bad("project_latents: kv_b_proj " + kv_b_proj.describe() + " does not hold P key rows and " +
        std::to_string(v.size(2)) + " value rows for each of " + std::to_string(heads) + " heads of k " + k.describe());
  }
  if (k.dtype != v.dtype || !float_dtype(k.dtype)) {
    bad("project_latents: k and v must share a float dtype (" + k.describe() + ", " + v.describe() + ")");
  }
  check_accessible(queue, latents, "project_latents: latents");
  check_accessible(queue, kv_b_proj, "project_latents: kv_b_proj");
  check_accessible(queue, k, "project_latents: k");
  check_accessible(queue, v, "project_latents: v");
}

DType PrefillBackend::latent_dtype(DType) const { return DType::float32; }

Descale PrefillBackend::quantise_e4m3(Queue& queue, const TensorView& from, const TensorView& to,
                                      std::optional<float> scale, float* /*scratch*/) const {
  require_host(*this, queue, "quantise_e4m3");
  constexpr float e4m3_largest = 448.0f;
  const auto each = [&](auto&& f) {
    for (std::int64_t t = 0; t < from.size(0); ++t)
      for (std::int64_t h = 0; h < from.size(1); ++h)
        for (std::int64_t d = 0; d < from.size(2); ++d) f(t, h, d);
  };
  if (!scale) {
    float largest = 0.0f;
    each([&](std::int64_t t, std::int64_t h, std::int64_t d) {
      largest = std::max(largest, std::fabs(load_as_float(from.data, from.dtype, from.offset(t, h, d))));
    });
    scale = largest > 0.0f ? largest / e4m3_largest : 1.0f;
  }
  each([&](std::int64_t t, std::int64_t h, std::int64_t d) {
    const float value = load_as_float(from.data, from.dtype, from.offset(t, h, d));
    store_from_float(to.data, DType::float8_e4m3, to.offset(t, h, d), value / *scale);
  });
  return Descale(*scale);
}

void PrefillBackend::gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                                    const TensorView& k) const {
  require_host(*this, queue, "gather_latents");
  check_latent_gather(queue, gather, latents, k);
  const std::int64_t width = latents.size(1);
  const std::int64_t rope =
      gather.from_cache() ? numeric::cache_rope_width(gather.format, gather.cache.size(2), width) : gather.k_pe.size(1);
  const std::int64_t rope_at = k.size(2) - rope;
  const std::int64_t block_size = gather.from_cache() ? gather.cache.size(1) : 1;
  auto* out = static_cast<float*>(latents.data);
  std::vector<float> rope_row(static_cast<std::size_t>(rope));
  for (std::int64_t t = 0; t < gather.tokens; ++t) {
    float* row = out + t * latents.stride[0];
    if (gather.from_cache() && gather.format != CacheFormat::plain) {
      const std::int64_t block = gather.slots[t] / block_size, slot = gather.slots[t] % block_size;
      const auto* record = static_cast<const std::uint8_t*>(gather.cache.data) + gather.cache.offset(block, slot);
      for (std::int64_t l = 0; l < width; ++l)
        row[l * latents.stride[1]] = numeric::decode_cache_value(gather.format, record, l);
      for (std::int64_t r = 0; r < rope; ++r)
        rope_row[static_cast<std::size_t>(r)] = numeric::decode_cache_value(gather.format, record, width + r);
    } else if (gather.from_cache()) {
      const std::int64_t block = gather.slots[t] / block_size, slot = gather.slots[t] % block_size;
      for (std::int64_t l = 0; l < width; ++l)
        row[l * latents.stride[1]] = element(gather.cache, block, slot, l) * gather.scale;
      for (std::int64_t r = 0; r < rope; ++r)
        rope_row[static_cast<std::size_t>(r)] = element(gather.cache, block, slot, width + r) * gather.scale;
    } else {
      for (std::int64_t l = 0; l < width; ++l) row[l * latents.stride[1]] = element(gather.kv_c, t, l);
      for (std::int64_t r = 0; r < rope; ++r) rope_row[static_cast<std::size_t>(r)] = element(gather.k_pe, t, r);
    }
    for (std::int64_t h = 0; h < k.size(1); ++h) {
      for (std::int64_t r = 0; r < rope; ++r) {
        store_from_float(k.data, k.dtype, k.offset(t, h, rope_at + r), rope_row[static_cast<std::size_t>(r)]);
      }
    }
  }
}

// Tiles of tokens x output columns accumulate in fp32 along l. Each column
// tile's weights are transposed once into [L, columns] so that the inner loop
// is an independent multiply-add per column, which the compiler vectorises
// without reassociating any sum.
void PrefillBackend::project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                                     const TensorView& k, const TensorView& v) const {
  require_host(*this, queue, "project_latents");
  check_latent_projection(queue, latents, kv_b_proj, k, v);
  constexpr std::int64_t token_tile = 8;
  constexpr std::int64_t column_tile = 256;
  const std::int64_t tokens = latents.size(0), width = latents.size(1);
  const std::int64_t columns = kv_b_proj.size(0);
  const ProjectedColumns out(kv_b_proj, k, v);
  const auto* x = static_cast<const float*>(latents.data);
  std::vector<float> wt(static_cast<std::size_t>(width * column_tile));
  std::vector<float> acc(static_cast<std::size_t>(token_tile * column_tile));
  for (std::int64_t c0 = 0; c0 < columns; c0 += column_tile) {
    const std::int64_t cn = std::min(column_tile, columns - c0);
    for (std::int64_t c = 0; c < cn; ++c) {
      for (std::int64_t l = 0; l < width; ++l)
        wt[static_cast<std::size_t>(l * column_tile + c)] = element(kv_b_proj, c0 + c, l);
    }
    for (std::int64_t t0 = 0; t0 < tokens; t0 += token_tile) {
      const std::int64_t tn = std::min(token_tile, tokens - t0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t l = 0; l < width; ++l) {
        const float* w_row = wt.data() + l * column_tile;
        for (std::int64_t t = 0; t < tn; ++t) {
          const float xl = x[(t0 + t) * latents.stride[0] + l * latents.stride[1]];
          float* a = acc.data() + t * column_tile;
          for (std::int64_t c = 0; c < cn; ++c) a[c] += xl * w_row[c];
        }
      }
      for (std::int64_t t = 0; t < tn; ++t) {
        for (std::int64_t c = 0; c < cn; ++c) {
          out.store(t0 + t, c0 + c, acc[static_cast<std::size_t>(t * column_tile + c)]);
        }
      }
    }
  }
}

}  // namespace mla
