// Tiny plugins for the loader's tests, one per MLA_TEST_PLUGIN_<VARIANT>
// definition; each is a MODULE library that, like any plugin, sees only
// mla/plugin/abi.h (compiled here as C++ to show the header is valid C++ too).
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "mla/plugin/abi.h"
#if defined(MLA_TEST_PLUGIN_REENTRANT)
#include "mla/selector.hpp"  // load_plugin
#endif

namespace {

[[maybe_unused]] int fail(char* message, std::size_t message_size, const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, message_size, format, args);
  va_end(args);
  return 1;
}

// A create that fails after setting its instance (num_heads 3) leaves it
// for the library to destroy; the tests read the count through dlsym.
int half_built = 0;

}  // namespace

// (A block, not MLA_PLUGIN_EXPORT: `extern "C" int x = 0;` warns.)
extern "C" {
__attribute__((visibility("default"))) int mla_test_plugin_destroyed = 0;
}

namespace {

int create(void*, const mla_plugin_params* params, void** instance, char* message, std::size_t message_size) {
  if (params->num_heads == 3) {
    *instance = &half_built;
    return fail(message, message_size, "refusing %d heads", params->num_heads);
  }
  *instance = nullptr;  // stateless
  return 0;
}

void destroy(void*, void* instance) {
  if (instance == &half_built) ++mla_test_plugin_destroyed;
}

int run_new_tokens(void*, const mla_plugin_queue*, const mla_plugin_attention_args* args, char* message,
                   std::size_t message_size) {
  return fail(message, message_size, "deliberate failure with %d sequences", static_cast<int>(args->batch_size));
}

int run_context_chunk(void*, const mla_plugin_queue*, int32_t chunk_index, const mla_plugin_attention_args*,
                      char* message, std::size_t message_size) {
  return fail(message, message_size, "deliberate failure in chunk %d", static_cast<int>(chunk_index));
}

// Fails without writing a message: the library must still say something.
int merge(void*, const mla_plugin_queue*, const mla_plugin_merge_args*, char*, std::size_t) { return 7; }

// NVIDIA 9.0 and newer only.
int hopper_or_newer(void*, int32_t vendor, int32_t major, int32_t) {
  return vendor == MLA_PLUGIN_VENDOR_NVIDIA && major >= 9;
}

int missing_dependency(void*, char* reason, std::size_t reason_size) {
  std::snprintf(reason, reason_size, "libtest_runtime.so.1 not found");
  return 0;
}

const int32_t bf16_only[] = {MLA_PLUGIN_BFLOAT16};
const mla_plugin_dims deepseek[] = {{128, 64, 128}};

// A backend that describes itself fully and refuses to compute.
[[maybe_unused]] mla_plugin_backend failing_backend(const char* name) {
  mla_plugin_backend backend{};
  backend.name = name;
  backend.dtypes = bf16_only;
  backend.num_dtypes = 1;
  backend.dims = deepseek;
  backend.num_dims = 1;
  backend.supports_capability = hopper_or_newer;
  backend.availability = missing_dependency;
  backend.ops.create = create;
  backend.ops.destroy = destroy;
  backend.ops.run_new_tokens = run_new_tokens;
  backend.ops.run_context_chunk = run_context_chunk;
  backend.ops.merge_attn_states = merge;
  return backend;
}

}  // namespace

#if !defined(MLA_TEST_PLUGIN_WRONG_ABI)
MLA_PLUGIN_EXPORT uint32_t mla_plugin_abi_version(void) { return MLA_PLUGIN_ABI_VERSION; }
#else
MLA_PLUGIN_EXPORT uint32_t mla_plugin_abi_version(void) { return MLA_PLUGIN_ABI_VERSION + 41u; }
#endif

#if !defined(MLA_TEST_PLUGIN_NO_REGISTER)
MLA_PLUGIN_EXPORT int mla_plugin_register(const mla_plugin_host* host, char* message, size_t message_size) {
  if (host->abi_version != MLA_PLUGIN_ABI_VERSION) return fail(message, message_size, "host ABI mismatch");
#if defined(MLA_TEST_PLUGIN_WRONG_ABI)
  return fail(message, message_size, "must never be called");
#elif defined(MLA_TEST_PLUGIN_DUPLICATE)
  // A factory first, so a test can see that it is not committed either.
  const mla_plugin_backend backend = failing_backend("DUPLICATE_TEST");
  if (host->register_named_factory(host->context, "DUPLICATE_TEST_FACTORY", &backend, MLA_PLUGIN_REGISTER_ADD) != 0)
    return 1;
  return host->register_backend(host->context, "CUSTOM", &backend, MLA_PLUGIN_REGISTER_ADD);
#elif defined(MLA_TEST_PLUGIN_FAILING)
  const mla_plugin_backend backend = failing_backend("FAILING_TEST");
  return host->register_named_factory(host->context, "FAILING_TEST_FACTORY", &backend, MLA_PLUGIN_REGISTER_ADD);
#elif defined(MLA_TEST_PLUGIN_REGISTER_ERROR)
  const mla_plugin_backend backend = failing_backend("REGISTER_ERROR_TEST");
  host->register_named_factory(host->context, "REGISTER_ERROR_FACTORY", &backend, MLA_PLUGIN_REGISTER_ADD);
  return fail(message, message_size, "the device library is too old");
#elif defined(MLA_TEST_PLUGIN_REGISTER_THROWS)
  // A C++ plugin that lets an exception out through the C ABI, after staging
  // a factory: the load fails with the exception's text and commits nothing.
  const mla_plugin_backend backend = failing_backend("REGISTER_THROWS_TEST");
  host->register_named_factory(host->context, "REGISTER_THROWS_FACTORY", &backend, MLA_PLUGIN_REGISTER_ADD);
  (void)message;
  (void)message_size;
  throw std::runtime_error("the plugin's own exception");
#elif defined(MLA_TEST_PLUGIN_REENTRANT)
  // Loads another plugin while being loaded (a C++ plugin linking libmla):
  // the loader must refuse, not deadlock on its own mutex.
  (void)message;
  (void)message_size;
  mla::load_plugin(MLA_TEST_PLUGIN_EMPTY_PATH);
  const mla_plugin_backend backend = failing_backend("REENTRANT_TEST");
  return host->register_named_factory(host->context, "REENTRANT_FACTORY", &backend, MLA_PLUGIN_REGISTER_ADD);
#elif defined(MLA_TEST_PLUGIN_BAD_DESCRIPTION)
  // The second registration lacks an operation; the plugin ignores the
  // refusal and reports success, which must not make the load succeed.
  const mla_plugin_backend good = failing_backend("BAD_DESCRIPTION_GOOD");
  host->register_named_factory(host->context, "BAD_DESCRIPTION_GOOD_FACTORY", &good, MLA_PLUGIN_REGISTER_ADD);
  mla_plugin_backend bad = failing_backend("BAD_DESCRIPTION_BAD");
  bad.ops.run_context_chunk = nullptr;
  host->register_named_factory(host->context, "BAD_DESCRIPTION_BAD_FACTORY", &bad, MLA_PLUGIN_REGISTER_ADD);
  return 0;
#elif defined(MLA_TEST_PLUGIN_UNKNOWN_MEMBER)
  const mla_plugin_backend backend = failing_backend("UNKNOWN_MEMBER_TEST");
  return host->register_backend(host->context, "FLASH_ATTN", &backend, MLA_PLUGIN_REGISTER_ADD);
#elif defined(MLA_TEST_PLUGIN_EMPTY)
  return 0;
#elif defined(MLA_TEST_PLUGIN_REPLACE)
  // Overrides KOKKOS on purpose, and says so.
  const mla_plugin_backend backend = failing_backend("REPLACE_TEST");
  if (host->register_backend(host->context, "KOKKOS", &backend, MLA_PLUGIN_REGISTER_REPLACE) != 0) return 1;
  return host->register_named_factory(host->context, "REPLACE_TEST_FACTORY", &backend, MLA_PLUGIN_REGISTER_ADD);
#else
#error "define one MLA_TEST_PLUGIN_<VARIANT>"
#endif
}
#endif
