// Every way a plugin load can fail says which file and why, and leaves the
// registries, the factories and the list of loaded plugins as they were.
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

#include "mla/backend/registry.hpp"
#include "mla/platform.hpp"
#include "mla/plugin/abi.h"
#include "mla/selector.hpp"
#include "plugin_support.hpp"

namespace mla::plugin_test {
namespace {

namespace fs = std::filesystem;

const std::string example_plugin = MLA_EXAMPLE_PLUGIN;

class PluginErrors : public ::testing::Test {
 protected:
  // CUSTOM held by the example plugin: the state the duplicate test needs,
  // and the one later tests in the same process expect.
  void SetUp() override {
    load_plugin(example_plugin);
    restore_custom();
  }
  void TearDown() override { restore_custom(); }
  static void restore_custom() {
    if (const auto entry = find_named_factory("EXAMPLE_PLUGIN")) {
      register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, *entry, RegisterMode::replace);
    }
  }

  // Loads `path`, expects Error(plugin) whose message holds every fragment,
  // and checks that nothing changed.
  static void expect_failed_load(const std::string& path, const std::vector<std::string>& fragments) {
    const RegistrySnapshot before = snapshot();
    const std::string message = error_of([&] { load_plugin(path); }, ErrorCategory::plugin);
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "missing '" << fragment << "' in: " << message;
    }
    EXPECT_EQ(snapshot(), before);
  }

  static std::string canonical(const std::string& path) { return fs::canonical(path).string(); }
};

TEST_F(PluginErrors, MissingFile) {
  const TempDir dir;
  const std::string path = dir.path() + "/libnot_there.so";
  expect_failed_load(path, {"Cannot load plugin '" + path + "': no such file"});
}

TEST_F(PluginErrors, Directory) {
  const TempDir dir;
  expect_failed_load(dir.path(), {"Cannot load plugin '" + dir.path() + "': not a regular file"});
}

TEST_F(PluginErrors, NotASharedLibrary) {
  const TempDir dir;
  const std::string path = dir.write("libtext.so", "this is a text file, not an ELF object\n");
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "': not a loadable shared library: "});
}

TEST_F(PluginErrors, SharedLibraryWithoutTheVersionSymbol) {
  // libmla itself: a real shared library that is no plugin.
  if (!MLA_SHARED_LIBMLA) GTEST_SKIP() << "libmla is static in this build";
  const std::string path = MLA_LIBMLA_FILE;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'", "does not export mla_plugin_abi_version"});
}

TEST_F(PluginErrors, MissingRegisterSymbol) {
  const std::string path = MLA_TEST_PLUGIN_NO_REGISTER;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'", "does not export mla_plugin_register"});
}

TEST_F(PluginErrors, AbiVersionMismatch) {
  const std::string path = MLA_TEST_PLUGIN_WRONG_ABI;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'",
                            "built for plugin ABI version " + std::to_string(MLA_PLUGIN_ABI_VERSION + 41u),
                            "this library expects version " + std::to_string(MLA_PLUGIN_ABI_VERSION)});
}

TEST_F(PluginErrors, DuplicateRegistrationWithoutReplace) {
  const std::string path = MLA_TEST_PLUGIN_DUPLICATE;
  // The plugin stages a factory before CUSTOM collides: neither is committed.
  expect_failed_load(
      path, {"Cannot load plugin '" + canonical(path) + "'",
             "MLA prefill backend CUSTOM, which is already registered (by plugin '" + canonical(example_plugin) + "')",
             "MLA_PLUGIN_REGISTER_REPLACE"});
  EXPECT_FALSE(find_named_factory("DUPLICATE_TEST_FACTORY").has_value());
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).description.name, "EXAMPLE_PLUGIN");

  // A failed load is not remembered: once CUSTOM is free the same file loads.
  mla_prefill_registry().clear_override(MlaPrefillBackendKind::CUSTOM);
  load_plugin(path);
  EXPECT_EQ(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).description.name, "DUPLICATE_TEST");
  EXPECT_TRUE(find_named_factory("DUPLICATE_TEST_FACTORY").has_value());
  const std::vector<std::string> loaded = loaded_plugins();
  EXPECT_NE(std::find(loaded.begin(), loaded.end(), canonical(path)), loaded.end());
}

TEST_F(PluginErrors, RegisterFunctionFails) {
  const std::string path = MLA_TEST_PLUGIN_REGISTER_ERROR;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'",
                            "mla_plugin_register failed: the device library is too old"});
  EXPECT_FALSE(find_named_factory("REGISTER_ERROR_FACTORY").has_value());
}

TEST_F(PluginErrors, AnExceptionOutOfRegisterFailsTheLoad) {
  const std::string path = MLA_TEST_PLUGIN_REGISTER_THROWS;
  expect_failed_load(
      path, {"Cannot load plugin '" + canonical(path) + "'", "mla_plugin_register threw: the plugin's own exception"});
  EXPECT_FALSE(find_named_factory("REGISTER_THROWS_FACTORY").has_value());
}

TEST_F(PluginErrors, APluginLoadingAPluginDuringItsOwnLoadIsRefused) {
  const std::string path = MLA_TEST_PLUGIN_REENTRANT;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'",
                            "mla_plugin_register threw: ", "a plugin loaded a plugin while being loaded itself"});
  EXPECT_FALSE(find_named_factory("REENTRANT_FACTORY").has_value());
}

TEST_F(PluginErrors, RefusedRegistrationFailsTheLoadEvenIfThePluginIgnoresIt) {
  const std::string path = MLA_TEST_PLUGIN_BAD_DESCRIPTION;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'",
                            "register_named_factory(BAD_DESCRIPTION_BAD_FACTORY): backend BAD_DESCRIPTION_BAD: "
                            "the required operation run_context_chunk is NULL"});
  EXPECT_FALSE(find_named_factory("BAD_DESCRIPTION_GOOD_FACTORY").has_value());
}

TEST_F(PluginErrors, UnknownMember) {
  const std::string path = MLA_TEST_PLUGIN_UNKNOWN_MEMBER;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "'",
                            "register_backend(FLASH_ATTN): Unknown MLA prefill backend: 'FLASH_ATTN'. Valid options "
                            "are: REFERENCE, KOKKOS, CUDA_FLASH, HIP_FLASH, HOPPER_FLASH, CUSTOM"});
}

TEST_F(PluginErrors, PluginThatRegistersNothing) {
  const std::string path = MLA_TEST_PLUGIN_EMPTY;
  expect_failed_load(path, {"Cannot load plugin '" + canonical(path) + "': it registered no backend"});
}

TEST_F(PluginErrors, ExplicitReplaceOverridesARegisteredMember) {
  MlaPrefillRegistry& registry = mla_prefill_registry();
  register_mla_prefill_backend(MlaPrefillBackendKind::KOKKOS, *find_named_factory("EXAMPLE_PLUGIN"));
  ASSERT_TRUE(registry.is_overridden(MlaPrefillBackendKind::KOKKOS));
  load_plugin(MLA_TEST_PLUGIN_REPLACE);
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::KOKKOS).description.name, "REPLACE_TEST");
  EXPECT_TRUE(find_named_factory("REPLACE_TEST_FACTORY").has_value());
  registry.clear_override(MlaPrefillBackendKind::KOKKOS);
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::KOKKOS).description.name, "KOKKOS");
}

// A plugin's description reaches validate() unchanged, and failing
// operations become Error(plugin) naming the file, the backend and the call.
TEST_F(PluginErrors, FailingOperationsNamePluginBackendAndCall) {
  const std::string path = MLA_TEST_PLUGIN_FAILING;
  load_plugin(path);
  const std::optional<BackendEntry> entry = find_named_factory("FAILING_TEST_FACTORY");
  ASSERT_TRUE(entry.has_value());
  const BackendDescription& description = entry->description;
  EXPECT_EQ(validate(description, parse_platform("nvidia:9.0"), {DType::bfloat16, deepseek_dims}),
            (std::vector<std::string>{"required dependencies not available (libtest_runtime.so.1 not found)"}));
  const std::vector<std::string> reasons =
      validate(description, parse_platform("nvidia:8.0"), {DType::float32, MlaDims{64, 64, 128}});
  ASSERT_EQ(reasons.size(), 4u);
  EXPECT_EQ(reasons[0], "compute capability 8.0 not supported");
  EXPECT_EQ(reasons[1], "dtype float32 not supported");
  EXPECT_EQ(reasons[2], "required dependencies not available (libtest_runtime.so.1 not found)");
  EXPECT_EQ(reasons[3].rfind("Model does not have supported MLA dimensions", 0), 0u) << reasons[3];

  const std::string prefix = "Plugin '" + canonical(path) + "', backend FAILING_TEST: ";
  BackendParams params;
  params.dtype = DType::bfloat16;
  params.num_heads = 3;
  std::string message = error_of([&] { entry->factory(params); }, ErrorCategory::plugin);
  EXPECT_EQ(message, prefix + "create failed: refusing 3 heads");
  // That create had set its instance before failing: the library destroyed it.
  void* handle = dlopen(canonical(path).c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr) << "the plugin is loaded";
  const auto* destroyed = static_cast<const int*>(dlsym(handle, "mla_test_plugin_destroyed"));
  ASSERT_NE(destroyed, nullptr);
  EXPECT_EQ(*destroyed, 1);
  dlclose(handle);

  params.num_heads = 2;
  const std::unique_ptr<PrefillBackend> backend = entry->factory(params);
  EXPECT_EQ(backend->name(), "FAILING_TEST");
  std::mt19937_64 rng(3);
  PrefillMetadata metadata = PrefillMetadata::from_lengths({4, 3}, {4, 3});
  metadata.add_chunk({2, 0});
  const Step step = make_step(rng, params, std::move(metadata));
  Queue queue = Queue::host();
  backend->prepare(queue, step.metadata);
  message = error_of([&] { backend->run_new_tokens(queue, step.q.view, step.k.view, step.v.view, 0.1f, true); },
                     ErrorCategory::plugin);
  EXPECT_EQ(message, prefix + "run_new_tokens failed: deliberate failure with 2 sequences");
  message = error_of(
      [&] { backend->run_context_chunk(queue, 0, step.q.view, step.chunk_k[0].view, step.chunk_v[0].view, 0.1f); },
      ErrorCategory::plugin);
  EXPECT_EQ(message, prefix + "run_context_chunk failed: deliberate failure in chunk 0");

  HostTensor out(DType::bfloat16, {7, 2, params.dims.v_head_dim});
  HostTensor lse(DType::float32, {2, 7});
  out.fill_random(rng, -1.0f, 1.0f);
  lse.fill_random(rng, -1.0f, 1.0f);
  HostTensor merged(DType::bfloat16, {7, 2, params.dims.v_head_dim});
  const MergeArgs args{out.view, lse.view, out.view, lse.view, merged.view, {}, std::nullopt, std::nullopt};
  message = error_of([&] { backend->merge_attn_states(queue, args); }, ErrorCategory::plugin);
  EXPECT_EQ(message, prefix + "merge_attn_states failed: (the plugin gave no message)");

  // Arguments are checked by the library before the plugin sees them.
  message =
      error_of([&] { backend->run_new_tokens(queue, step.chunk_k[0].view, step.k.view, step.v.view, 0.1f, true); },
               ErrorCategory::invalid_argument);
  EXPECT_NE(message.find("q has 2 tokens but cu_seqlens_q needs 7"), std::string::npos) << message;
}

}  // namespace
}  // namespace mla::plugin_test
