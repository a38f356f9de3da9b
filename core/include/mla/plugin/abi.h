/* The C ABI of mlaprefill backend plugins.
 *
 * A plugin is a shared library that adds prefill backends to a program using
 * mlaprefill without being linked against it: it includes only this header
 * (pure C, also valid C++) and exports two functions:
 *
 *   MLA_PLUGIN_EXPORT uint32_t mla_plugin_abi_version(void)
 *       { return MLA_PLUGIN_ABI_VERSION; }
 *   MLA_PLUGIN_EXPORT int mla_plugin_register(const mla_plugin_host* host,
 *                                             char* message, size_t message_size);
 *
 * The library calls mla_plugin_abi_version() first and refuses a plugin whose
 * answer differs from its own MLA_PLUGIN_ABI_VERSION. Then it calls
 * mla_plugin_register(), in which the plugin describes each backend in an
 * mla_plugin_backend and hands it to host->register_backend (bind it to a
 * registry member: "CUSTOM", or a built-in member it overrides) and/or to
 * host->register_named_factory (a name that YAML `overrides:` can refer to).
 *
 * Rules of the road:
 * - Loading is all or nothing: registrations are staged while
 *   mla_plugin_register runs and reach the registry only when it returns 0
 *   and every registration was accepted. A failed load changes nothing.
 * - The host copies names, dtype and dims lists during the call; function
 *   pointers and user_data must stay valid for the life of the process (a
 *   loaded plugin is never unloaded). The host struct itself is valid only
 *   during mla_plugin_register.
 * - Every call that can fail returns 0 on success and anything else on
 *   failure, after writing a NUL-terminated explanation of at most
 *   message_size bytes (snprintf(message, message_size, ...)). The library
 *   turns it into mla::Error(plugin) naming the plugin file and the call.
 * - Tensors arrive already checked against the contract of mla/backend.hpp
 *   (shapes, dtypes, memory the queue can reach). Outputs are the library's
 *   allocations or the caller's views, which may be strided: honour every
 *   stride of every tensor. All indices are 64-bit element offsets.
 * - Calls into one backend instance are not concurrent; different instances
 *   may be used from different threads. availability, supports_capability,
 *   create and destroy may run on several threads at once with the same
 *   user_data: they must be thread-safe.
 *
 * Any change to a struct, enum value or signature below increments
 * MLA_PLUGIN_ABI_VERSION.
 */
#ifndef MLA_PLUGIN_H
#define MLA_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define MLA_PLUGIN_ABI_VERSION 2u

/* Names of the two exported functions, for dlsym. */
#define MLA_PLUGIN_ABI_VERSION_SYMBOL "mla_plugin_abi_version"
#define MLA_PLUGIN_REGISTER_SYMBOL "mla_plugin_register"

#ifdef __cplusplus
#define MLA_PLUGIN_EXTERN_C extern "C"
#else
#define MLA_PLUGIN_EXTERN_C
#endif
#if defined(_WIN32)
#define MLA_PLUGIN_EXPORT MLA_PLUGIN_EXTERN_C __declspec(dllexport)
#else
#define MLA_PLUGIN_EXPORT MLA_PLUGIN_EXTERN_C __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Enumerations travel as int32_t so that the struct layout does not depend
 * on the compiler's choice of enum size. */
enum mla_plugin_dtype {
  MLA_PLUGIN_FLOAT32 = 0,
  MLA_PLUGIN_FLOAT16 = 1, /* IEEE binary16 */
  MLA_PLUGIN_BFLOAT16 = 2,
  MLA_PLUGIN_FLOAT8_E4M3 = 3 /* OCP e4m3fn; output only, with an out_scale */
};

enum mla_plugin_memory {
  MLA_PLUGIN_MEMORY_HOST = 0,
  MLA_PLUGIN_MEMORY_DEVICE = 1, /* on a host queue this is host memory too */
  MLA_PLUGIN_MEMORY_SHARED = 2
};

enum mla_plugin_vendor { MLA_PLUGIN_VENDOR_NVIDIA = 0, MLA_PLUGIN_VENDOR_AMD = 1, MLA_PLUGIN_VENDOR_HOST = 2 };

/* What kind of queue a call runs on. */
enum mla_plugin_device { MLA_PLUGIN_DEVICE_HOST = 0, MLA_PLUGIN_DEVICE_CUDA = 1, MLA_PLUGIN_DEVICE_HIP = 2 };

/* How a registration treats a name that is already taken. */
enum mla_plugin_register_mode {
  MLA_PLUGIN_REGISTER_ADD = 0,    /* fail the load if the member / name is taken */
  MLA_PLUGIN_REGISTER_REPLACE = 1 /* replace what is there */
};

enum mla_plugin_quant { MLA_PLUGIN_QUANT_FP8_E4M3_STATIC_PER_TENSOR = 0 };

/* A strided view of up to four dimensions; unused trailing dims are 0. A
 * tensor that was not requested (an LSE nobody wants) has data NULL and
 * rank 0. */
typedef struct mla_plugin_tensor {
  void* data;
  int32_t dtype; /* enum mla_plugin_dtype */
  int32_t rank;  /* 0..4 */
  int64_t shape[4];
  int64_t stride[4]; /* in elements, not bytes */
  int32_t memory;    /* enum mla_plugin_memory */
} mla_plugin_tensor;

typedef struct mla_plugin_dims {
  int32_t qk_nope_head_dim; /* P */
  int32_t qk_rope_head_dim; /* R; queries and keys have P + R elements a head */
  int32_t v_head_dim;       /* V */
} mla_plugin_dims;

/* Constructor arguments of a backend instance. */
typedef struct mla_plugin_params {
  int32_t num_heads;
  int32_t kv_lora_rank;
  mla_plugin_dims dims;
  int32_t dtype; /* element type of q, k and v */
} mla_plugin_params;

/* The queue a call runs on. Work may be enqueued on native_stream
 * asynchronously; the caller synchronises through its queue. */
typedef struct mla_plugin_queue {
  int32_t device; /* enum mla_plugin_device */
  int32_t device_index;
  void* native_stream; /* cudaStream_t / hipStream_t; NULL on the host */
} mla_plugin_queue;

typedef struct mla_plugin_chunk {
  const int32_t* cu_seqlens_k; /* [batch_size + 1], host */
  int32_t max_seqlen_k;
} mla_plugin_chunk;

/* One prefill step (mla::PrefillMetadata). Arrays are in host memory and are
 * valid only during the call that receives them: copy what you keep. */
typedef struct mla_plugin_metadata {
  int32_t batch_size;          /* B */
  const int32_t* cu_seqlens_q; /* [B + 1] */
  const int32_t* cu_seqlens_k; /* [B + 1] keys of the new tokens */
  int32_t max_seqlen_q;
  int32_t max_seqlen_k;
  int32_t causal;
  int32_t num_chunks;
  const mla_plugin_chunk* chunks; /* [num_chunks] context chunks */
} mla_plugin_metadata;

/* One attention call. For run_new_tokens cu_seqlens_k are the new tokens'
 * keys and causal is the metadata's flag (bottom-right aligned when a
 * sequence has more keys than queries); for run_context_chunk they are the
 * chunk's keys and causal is 0. Scores are scale * q.k. Rows without keys:
 * output 0, LSE -inf. */
typedef struct mla_plugin_attention_args {
  mla_plugin_tensor q;         /* [Nq, H, P + R] */
  mla_plugin_tensor k;         /* [Nk, H, P + R] */
  mla_plugin_tensor v;         /* [Nk, H, V] */
  mla_plugin_tensor out;       /* [Nq, H, V]; fp8 e4m3 when has_out_scale */
  mla_plugin_tensor lse;       /* [H, Nq] float32, natural log; rank 0: not wanted */
  int32_t batch_size;          /* B */
  const int32_t* cu_seqlens_q; /* [B + 1], host */
  const int32_t* cu_seqlens_k; /* [B + 1], host */
  int32_t max_seqlen_q;
  int32_t max_seqlen_k;
  int32_t causal;
  int32_t has_out_scale; /* out = saturate(attention / out_scale) as e4m3 */
  float out_scale;
  float scale; /* softmax scale, finite */
} mla_plugin_attention_args;

/* merge_attn_states: joins two partial attentions of the same queries by
 * their LSEs, as mla::PrefillBackend::merge_attn_states does. Per token t and
 * head h, with p = prefix_lse[h, t] and s = suffix_lse[h, t] (+inf read as
 * -inf), m = max(p, s): out = prefix_out * e^(p-m)/z + suffix_out * e^(s-m)/z
 * with z = e^(p-m) + e^(s-m), out_lse = m + ln z; both -inf gives 0 and
 * -inf. Tokens t >= prefill_tokens_with_context (when has_... is set) copy
 * the suffix and its LSE unchanged. */
typedef struct mla_plugin_merge_args {
  mla_plugin_tensor prefix_out; /* [N, H, V] */
  mla_plugin_tensor prefix_lse; /* [H, N] float32 */
  mla_plugin_tensor suffix_out; /* [N, H, V] */
  mla_plugin_tensor suffix_lse; /* [H, N] float32 */
  mla_plugin_tensor out;        /* [N, H, V] */
  mla_plugin_tensor out_lse;    /* [H, N] float32; rank 0: not written */
  int32_t has_prefill_tokens_with_context;
  int64_t prefill_tokens_with_context;
  int32_t has_out_scale;
  float out_scale;
} mla_plugin_merge_args;

/* The operations of one backend. `instance` is what create() returned. */
typedef struct mla_plugin_backend_ops {
  /* Required. Builds an instance for `params`; may set *instance to NULL
   * when the backend keeps no state. When it fails after setting *instance,
   * the library passes that instance to destroy. */
  int (*create)(void* user_data, const mla_plugin_params* params, void** instance, char* message, size_t message_size);
  /* Required. Frees an instance (also called with NULL instances). */
  void (*destroy)(void* user_data, void* instance);
  /* Optional (NULL: nothing to do). Called once a step before the runs,
   * e.g. to upload cu_seqlens; the library has already checked the
   * metadata, and passes the same values to every run again. */
  int (*prepare)(void* instance, const mla_plugin_queue* queue, const mla_plugin_metadata* metadata, char* message,
                 size_t message_size);
  /* Required. Causal (per metadata) attention of the new tokens. */
  int (*run_new_tokens)(void* instance, const mla_plugin_queue* queue, const mla_plugin_attention_args* args,
                        char* message, size_t message_size);
  /* Required. Non-causal attention of every query against context chunk
   * `chunk_index`; the LSE is always wanted. */
  int (*run_context_chunk)(void* instance, const mla_plugin_queue* queue, int32_t chunk_index,
                           const mla_plugin_attention_args* args, char* message, size_t message_size);
  /* Required. */
  int (*merge_attn_states)(void* instance, const mla_plugin_queue* queue, const mla_plugin_merge_args* args,
                           char* message, size_t message_size);
  /* Optional (NULL: the description's fp8_output answers). Non-zero when the
   * instance can write the quantised output `quant` (enum mla_plugin_quant). */
  int (*supports_quant_output)(void* instance, int32_t quant);
} mla_plugin_backend_ops;

/* Everything the selector knows about a backend before building one. */
typedef struct mla_plugin_backend {
  const char* name;            /* e.g. "MY_FLASH"; what the backend reports as its name */
  const int32_t* dtypes;       /* input dtypes served (enum mla_plugin_dtype, not fp8) */
  size_t num_dtypes;           /* at least 1 */
  const mla_plugin_dims* dims; /* supported MLA dims */
  size_t num_dims;             /* 0: any dims */
  int32_t fp8_output;          /* non-zero: can write fp8 e4m3 output with a scale */
  void* user_data;             /* passed to the callbacks below and to create/destroy */
  /* Optional (NULL: every device). Non-zero when the backend runs on a
   * device of `vendor` (enum mla_plugin_vendor) with this capability
   * (NVIDIA compute capability; AMD from the gfx name, gfx90a = 9.0). */
  int (*supports_capability)(void* user_data, int32_t vendor, int32_t major, int32_t minor);
  /* Optional (NULL: always available). Non-zero when usable in this process;
   * otherwise writes why, e.g. "libfoo.so.2 not found". */
  int (*availability)(void* user_data, char* reason, size_t reason_size);
  mla_plugin_backend_ops ops;
} mla_plugin_backend;

/* What the library offers a plugin during mla_plugin_register. Pass
 * `context` back as the first argument. Each call returns 0 when the
 * registration is staged; otherwise the load fails with the library's
 * explanation (the plugin may stop early by returning non-zero). */
typedef struct mla_plugin_host {
  uint32_t abi_version;    /* MLA_PLUGIN_ABI_VERSION of the library */
  const char* plugin_path; /* the file being loaded, for the plugin's messages */
  void* context;
  /* Binds `backend` to registry member `member` ("CUSTOM", "KOKKOS", ...).
   * `mode` is enum mla_plugin_register_mode: ADD fails the load when the
   * member already has an override (CUSTOM registered, or a member bound by
   * another plugin or YAML); a built-in member without one (e.g. KOKKOS) is
   * taken over by ADD too. Overriding an override on purpose needs REPLACE. */
  int (*register_backend)(void* context, const char* member, const mla_plugin_backend* backend, int32_t mode);
  /* Makes `backend` available under `factory_name` to YAML `overrides:`
   * (e.g. overrides: {KOKKOS: MY_FLASH}). Built-in names are refused. */
  int (*register_named_factory)(void* context, const char* factory_name, const mla_plugin_backend* backend,
                                int32_t mode);
} mla_plugin_host;

typedef uint32_t (*mla_plugin_abi_version_fn)(void);
typedef int (*mla_plugin_register_fn)(const mla_plugin_host* host, char* message, size_t message_size);

/* The two functions a plugin defines (declared here so that a plugin with the
 * wrong signature fails to compile). */
MLA_PLUGIN_EXPORT uint32_t mla_plugin_abi_version(void);
MLA_PLUGIN_EXPORT int mla_plugin_register(const mla_plugin_host* host, char* message, size_t message_size);

#ifdef __cplusplus
}
#endif

#endif /* MLA_PLUGIN_H */
