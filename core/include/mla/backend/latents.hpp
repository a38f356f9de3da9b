// For backend authors: the two halves of the MLA step's key/value preparation (run_mla_prefill),
// which every backend runs on its own device: gathering latent and rope rows
// (from the new tokens' tensors or from the paged cache), and up-projecting
// the latents through kv_b_proj into per-head keys and values.
//
// Sizes: T rows, L = kv_lora_rank, H heads, dims P, R, V.
#pragma once

#include <cstdint>

#include "mla/queue.hpp"

namespace mla {

// Where the T rows come from. Either the new tokens (kv_c set: row t is
// kv_c[t] and k_pe[t]) or the paged cache (kv_c empty: row t is the cache
// token at `slots[t]`, i.e. block slots[t] / block_size, position
// slots[t] % block_size, latent first and rope key last).
struct LatentGather {
  TensorView kv_c;   // [T, L] the new tokens' latents
  TensorView k_pe;   // [T, R] their rope keys
  TensorView cache;  // [num_blocks, block_size, L+R], any float dtype or float8_e4m3 bytes
  // How a cache row is stored (mla/tensor.hpp): a grouped format's cache is
  // [num_blocks, block_size, record bytes] of float8_e4m3 with unit last
  // stride, decoded by its group scales (scale must be 1).
  CacheFormat format = CacheFormat::plain;
  // [T] cache slots in memory the queue can read. The caller keeps them
  // alive until the gather has run (on a GPU queue: until the stream gets there).
  const std::int64_t* slots = nullptr;
  std::int64_t tokens = 0;  // T
  float scale = 1.0f;       // multiplies every value read from the cache (fp8 dequantisation)

  bool from_cache() const { return kv_c.empty_view(); }
};

// Checks a gather against its destinations, `latents` [T, L] float32 (or,
// with `compute_dtype_latents`, of k's dtype when that is bfloat16 or
// float16: PrefillBackend::latent_dtype) and `k` [T, H, P+R], and that
// `queue` can reach every tensor; raises Error(invalid_argument) naming the
// culprit. What every gather_latents override calls first. Slots are not
// read here (they may live on a device): run_mla_prefill has checked them
// against the block table.
void check_latent_gather(const Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k,
                         bool compute_dtype_latents = false);

// Checks a projection: `latents` [T, L] float32 (or k's bfloat16 or float16,
// as above), `kv_b_proj` [H*(P+V), L] of any float dtype (float8_e4m3 at its
// decoded values, no scale; see MlaStepInputs), `k` [T, H, P+R]
// and `v` [T, H, V] in one dtype, with P taken as kv_b_proj's rows per head
// minus V and R as the rest of k's width.
void check_latent_projection(const Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                             const TensorView& k, const TensorView& v, bool compute_dtype_latents = false);

// Where a host projection writes (the default project_latents, REFERENCE's,
// KOKKOS's): column c of kv_b_proj belongs to head c / (P+V); of a head's
// columns the first P are keys, k[t, h, j], the V after them values,
// v[t, h, j - P]. For arguments that passed check_latent_projection, in
// memory the calling thread can write.
struct ProjectedColumns {
  TensorView k, v;
  std::int64_t per_head = 0;  // P + V
  std::int64_t p = 0;

  ProjectedColumns(const TensorView& kv_b_proj, const TensorView& keys, const TensorView& values)
      : k(keys), v(values), per_head(kv_b_proj.size(0) / keys.size(1)), p(per_head - values.size(2)) {}

  // Output `column` of `token`, rounded to k's dtype.
  void store(std::int64_t token, std::int64_t column, float value) const {
    const std::int64_t head = column / per_head, j = column % per_head;
    if (j < p) {
      store_from_float(k.data, k.dtype, k.offset(token, head, j), value);
    } else {
      store_from_float(v.data, v.dtype, v.offset(token, head, j - p), value);
    }
  }
};

}  // namespace mla
