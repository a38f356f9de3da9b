/* An mlaprefill plugin to copy from: exact attention in float on the host,
 * registered as member CUSTOM and as the factory EXAMPLE_PLUGIN.
 *
 * It includes nothing of the library but mla/plugin/abi.h and links nothing of
 * it, so the same file builds against any installed mlaprefill with a
 * matching MLA_PLUGIN_ABI_VERSION:
 *
 *   cc -std=c11 -O2 -shared -fPIC -I<prefix>/include example_plugin.c -lm -o libmy_plugin.so
 *
 * Use it from YAML (plugins: [path/to/libmy_plugin.so]) and pick it with
 * `backend: CUSTOM`, or bind another member to it (overrides: {KOKKOS:
 * EXAMPLE_PLUGIN}). A real plugin replaces attention() and merge() with its
 * kernels, launched on queue->native_stream, and tightens the description.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla/plugin/abi.h"

#define BACKEND_NAME "EXAMPLE_PLUGIN"

/* ---- element access --------------------------------------------------- */

static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exponent = (uint32_t)(h >> 10) & 0x1fu;
  const uint32_t mantissa = (uint32_t)h & 0x3ffu;
  uint32_t bits;
  float value;
  if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24 */
    value = (float)mantissa * 5.9604644775390625e-8f;
    return sign != 0 ? -value : value;
  }
  if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13); /* inf or NaN */
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  memcpy(&value, &bits, sizeof value);
  return value;
}

/* Round to nearest even, like every other conversion of the library. */
static uint16_t float_to_half(float value) {
  uint32_t bits;
  uint32_t magnitude;
  uint16_t sign;
  memcpy(&bits, &value, sizeof bits);
  sign = (uint16_t)((bits >> 16) & 0x8000u);
  magnitude = bits & 0x7fffffffu;
  /* NaN stays NaN; 65520 and above round to infinity. */
  if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  /* Below 2^-14 the result is a subnormal: a multiple of 2^-24. */
  if (magnitude < 0x38800000u) {
    float scaled;
    memcpy(&scaled, &magnitude, sizeof scaled);
    return (uint16_t)(sign | (uint16_t)nearbyintf(scaled * 16777216.0f));
  }
  /* Round away the 13 dropped mantissa bits, then rebias the exponent (127 -> 15). */
  magnitude += 0xfffu + ((magnitude >> 13) & 1u);
  magnitude -= 0x38000000u;
  return (uint16_t)(sign | (uint16_t)(magnitude >> 13));
}

static float bf16_to_float(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static uint16_t float_to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u); /* keep NaN a NaN */
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

/* Element `offset` (in elements) of a tensor of float32, float16 or bfloat16. */
static float load(const mla_plugin_tensor* t, int64_t offset) {
  switch (t->dtype) {
    case MLA_PLUGIN_FLOAT16:
      return half_to_float(((const uint16_t*)t->data)[offset]);
    case MLA_PLUGIN_BFLOAT16:
      return bf16_to_float(((const uint16_t*)t->data)[offset]);
    default:
      return ((const float*)t->data)[offset];
  }
}

static void store(const mla_plugin_tensor* t, int64_t offset, float value) {
  switch (t->dtype) {
    case MLA_PLUGIN_FLOAT16:
      ((uint16_t*)t->data)[offset] = float_to_half(value);
      break;
    case MLA_PLUGIN_BFLOAT16:
      ((uint16_t*)t->data)[offset] = float_to_bf16(value);
      break;
    default:
      ((float*)t->data)[offset] = value;
      break;
  }
}

/* Offset of [i0, i1, i2] through the tensor's strides. */
static int64_t at(const mla_plugin_tensor* t, int64_t i0, int64_t i1, int64_t i2) {
  return i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2];
}

/* ---- the backend -------------------------------------------------------- */

typedef struct example_backend {
  mla_plugin_params params;
} example_backend;

static int fail(char* message, size_t message_size, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(message, message_size, format, args);
  va_end(args);
  return 1;
}

static int require_host(const mla_plugin_queue* queue, char* message, size_t message_size) {
  if (queue->device == MLA_PLUGIN_DEVICE_HOST) return 0;
  return fail(message, message_size, BACKEND_NAME " runs on the host queue only (got device kind %d)",
              (int)queue->device);
}

static int example_create(void* user_data, const mla_plugin_params* params, void** instance, char* message,
                          size_t message_size) {
  example_backend* backend;
  (void)user_data;
  if (params->dtype != MLA_PLUGIN_FLOAT32 && params->dtype != MLA_PLUGIN_FLOAT16 &&
      params->dtype != MLA_PLUGIN_BFLOAT16) {
    return fail(message, message_size, "dtype code %d is not served", (int)params->dtype);
  }
  backend = (example_backend*)malloc(sizeof *backend);
  if (backend == NULL) return fail(message, message_size, "out of memory");
  backend->params = *params;
  *instance = backend;
  return 0;
}

static void example_destroy(void* user_data, void* instance) {
  (void)user_data;
  free(instance);
}

/* Softmax attention of every query row against its sequence's keys, in
 * float. Causal rows see keys j <= i + sk - sq (bottom-right aligned). */
static int attention(const example_backend* backend, const mla_plugin_attention_args* a, char* message,
                     size_t message_size) {
  const int64_t heads = backend->params.num_heads;
  const int64_t dqk = backend->params.dims.qk_nope_head_dim + backend->params.dims.qk_rope_head_dim;
  const int64_t dv = backend->params.dims.v_head_dim;
  const float scale = a->scale;
  const int has_lse = a->lse.rank != 0;
  float* scores = (float*)malloc(sizeof(float) * (size_t)(a->max_seqlen_k > 0 ? a->max_seqlen_k : 1));
  float* acc = (float*)malloc(sizeof(float) * (size_t)dv);
  int32_t s;
  if (scores == NULL || acc == NULL) {
    free(scores);
    free(acc);
    return fail(message, message_size, "out of memory");
  }
  if (a->has_out_scale) { /* the library only asks when supports_quant_output says yes */
    free(scores);
    free(acc);
    return fail(message, message_size, BACKEND_NAME " does not write float8_e4m3 output");
  }
  for (s = 0; s < a->batch_size; ++s) {
    const int64_t q0 = a->cu_seqlens_q[s], sq = a->cu_seqlens_q[s + 1] - q0;
    const int64_t k0 = a->cu_seqlens_k[s], sk = a->cu_seqlens_k[s + 1] - k0;
    int64_t i, h, j, d;
    for (i = 0; i < sq; ++i) {
      int64_t visible = a->causal ? i + sk - sq + 1 : sk;
      if (visible > sk) visible = sk;
      if (visible < 0) visible = 0;
      for (h = 0; h < heads; ++h) {
        float max = -INFINITY, sum = 0.0f;
        for (j = 0; j < visible; ++j) {
          float dot = 0.0f;
          for (d = 0; d < dqk; ++d) dot += load(&a->q, at(&a->q, q0 + i, h, d)) * load(&a->k, at(&a->k, k0 + j, h, d));
          scores[j] = dot * scale;
          if (scores[j] > max) max = scores[j];
        }
        for (d = 0; d < dv; ++d) acc[d] = 0.0f;
        for (j = 0; j < visible; ++j) {
          const float p = expf(scores[j] - max);
          sum += p;
          for (d = 0; d < dv; ++d) acc[d] += p * load(&a->v, at(&a->v, k0 + j, h, d));
        }
        /* No visible key: output 0 and LSE -inf, never NaN. */
        for (d = 0; d < dv; ++d) store(&a->out, at(&a->out, q0 + i, h, d), visible > 0 ? acc[d] / sum : 0.0f);
        if (has_lse) {
          ((float*)a->lse.data)[h * a->lse.stride[0] + (q0 + i) * a->lse.stride[1]] =
              visible > 0 ? max + logf(sum) : -INFINITY;
        }
      }
    }
  }
  free(scores);
  free(acc);
  return 0;
}

static int example_run_new_tokens(void* instance, const mla_plugin_queue* queue, const mla_plugin_attention_args* args,
                                  char* message, size_t message_size) {
  if (require_host(queue, message, message_size) != 0) return 1;
  return attention((const example_backend*)instance, args, message, message_size);
}

static int example_run_context_chunk(void* instance, const mla_plugin_queue* queue, int32_t chunk_index,
                                     const mla_plugin_attention_args* args, char* message, size_t message_size) {
  (void)chunk_index; /* args already hold the chunk's keys */
  if (require_host(queue, message, message_size) != 0) return 1;
  return attention((const example_backend*)instance, args, message, message_size);
}

static float lse_at(const mla_plugin_tensor* lse, int64_t h, int64_t t) {
  return ((const float*)lse->data)[h * lse->stride[0] + t * lse->stride[1]];
}

static int example_merge(void* instance, const mla_plugin_queue* queue, const mla_plugin_merge_args* m, char* message,
                         size_t message_size) {
  const int64_t tokens = m->prefix_out.shape[0], heads = m->prefix_out.shape[1], dv = m->prefix_out.shape[2];
  int64_t t, h, d;
  (void)instance;
  if (require_host(queue, message, message_size) != 0) return 1;
  if (m->has_out_scale) return fail(message, message_size, BACKEND_NAME " does not write float8_e4m3 output");
  for (t = 0; t < tokens; ++t) {
    const int copy_suffix = m->has_prefill_tokens_with_context && t >= m->prefill_tokens_with_context;
    for (h = 0; h < heads; ++h) {
      float out_lse, prefix_weight = 0.0f, suffix_weight = 1.0f;
      if (copy_suffix) {
        out_lse = lse_at(&m->suffix_lse, h, t);
      } else {
        /* +inf marks an empty partial in some kernels: treat it as -inf. */
        const float p = isinf(lse_at(&m->prefix_lse, h, t)) ? -INFINITY : lse_at(&m->prefix_lse, h, t);
        const float s = isinf(lse_at(&m->suffix_lse, h, t)) ? -INFINITY : lse_at(&m->suffix_lse, h, t);
        const float max = p > s ? p : s;
        if (max == -INFINITY) {
          prefix_weight = suffix_weight = 0.0f;
          out_lse = -INFINITY;
        } else {
          const float pw = expf(p - max), sw = expf(s - max), z = pw + sw;
          prefix_weight = pw / z;
          suffix_weight = sw / z;
          out_lse = max + logf(z);
        }
      }
      /* A side of weight 0 is not read: an empty partial may hold NaN, and 0 * NaN is NaN. */
      for (d = 0; d < dv; ++d) {
        float value = 0.0f;
        if (copy_suffix) {
          value = load(&m->suffix_out, at(&m->suffix_out, t, h, d));
        } else {
          if (prefix_weight != 0.0f) value += load(&m->prefix_out, at(&m->prefix_out, t, h, d)) * prefix_weight;
          if (suffix_weight != 0.0f) value += load(&m->suffix_out, at(&m->suffix_out, t, h, d)) * suffix_weight;
        }
        store(&m->out, at(&m->out, t, h, d), value);
      }
      if (m->out_lse.rank != 0)
        ((float*)m->out_lse.data)[h * m->out_lse.stride[0] + t * m->out_lse.stride[1]] = out_lse;
    }
  }
  return 0;
}

/* ---- description and registration --------------------------------------- */

/* Host memory only, so only the host platform. */
static int example_supports_capability(void* user_data, int32_t vendor, int32_t major, int32_t minor) {
  (void)user_data;
  (void)major;
  (void)minor;
  return vendor == MLA_PLUGIN_VENDOR_HOST;
}

/* Nothing to look for: a plugin that needs a runtime or a device library
 * checks for it here and writes why it is missing. */
static int example_availability(void* user_data, char* reason, size_t reason_size) {
  (void)user_data;
  (void)reason;
  (void)reason_size;
  return 1;
}

static const int32_t example_dtypes[] = {MLA_PLUGIN_FLOAT32, MLA_PLUGIN_FLOAT16, MLA_PLUGIN_BFLOAT16};

MLA_PLUGIN_EXPORT uint32_t mla_plugin_abi_version(void) { return MLA_PLUGIN_ABI_VERSION; }

MLA_PLUGIN_EXPORT int mla_plugin_register(const mla_plugin_host* host, char* message, size_t message_size) {
  mla_plugin_backend backend;
  memset(&backend, 0, sizeof backend);
  backend.name = BACKEND_NAME;
  backend.dtypes = example_dtypes;
  backend.num_dtypes = sizeof example_dtypes / sizeof example_dtypes[0];
  backend.dims = NULL; /* any MLA dims */
  backend.num_dims = 0;
  backend.fp8_output = 0;
  backend.supports_capability = example_supports_capability;
  backend.availability = example_availability;
  backend.ops.create = example_create;
  backend.ops.destroy = example_destroy;
  backend.ops.run_new_tokens = example_run_new_tokens;
  backend.ops.run_context_chunk = example_run_context_chunk;
  backend.ops.merge_attn_states = example_merge;

  /* ADD: refuse to load rather than silently replace someone else's CUSTOM. */
  if (host->register_backend(host->context, "CUSTOM", &backend, MLA_PLUGIN_REGISTER_ADD) != 0 ||
      host->register_named_factory(host->context, BACKEND_NAME, &backend, MLA_PLUGIN_REGISTER_ADD) != 0) {
    return fail(message, message_size, "registration refused");
  }
  return 0;
}
