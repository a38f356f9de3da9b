// The backend registries: members and names, the CUSTOM slot, overrides, and
// the built-in table (vLLM's MLAPrefillBackendEnum / register_mla_prefill_backend
// and AttentionBackendEnum / register_backend, re-expressed).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "mla/backend/registry.hpp"
#include "mla/error.hpp"
#include "registry/fake_backend.hpp"

namespace mla {
namespace {

using test::FakeSpec;
using test::make_fake_entry;

class RegistryTest : public ::testing::Test {
 protected:
  test::RegistryReset reset_;
};

template <class Fn>
std::string error_message(Fn&& fn, ErrorCategory expected) {
  try {
    fn();
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), expected) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error raised";
  return {};
}

TEST_F(RegistryTest, MembersHaveDistinctNamesAndCustomIsNoAlias) {
  const auto members = MlaPrefillRegistry::members();
  ASSERT_EQ(members.size(), 6u);
  std::set<std::string> names;
  for (const MlaPrefillBackendKind kind : members) {
    const std::string name(MlaPrefillRegistry::name(kind));
    EXPECT_TRUE(names.insert(name).second) << name << " appears twice";
    EXPECT_EQ(mla_prefill_registry().parse(name), kind) << name;
    if (kind != MlaPrefillBackendKind::CUSTOM) {
      EXPECT_NE(name, "CUSTOM");
    }
  }
  EXPECT_EQ(MlaPrefillRegistry::name(MlaPrefillBackendKind::CUSTOM), "CUSTOM");
  EXPECT_EQ(AttentionRegistry::name(AttentionBackendKind::HIP_FLASH), "HIP_FLASH");
  EXPECT_EQ(MlaPrefillRegistry::name(MlaPrefillBackendKind::HOPPER_FLASH), "HOPPER_FLASH");
  EXPECT_EQ(mla_prefill_registry().label(), "MLA prefill backend");
  EXPECT_EQ(attention_registry().label(), "attention backend");
}

TEST_F(RegistryTest, UnknownNamesListTheValidOptions) {
  EXPECT_EQ(error_message([] { mla_prefill_registry().parse("NONEXISTENT"); }, ErrorCategory::not_found),
            "Unknown MLA prefill backend: 'NONEXISTENT'. Valid options are: REFERENCE, KOKKOS, CUDA_FLASH, HIP_FLASH, "
            "HOPPER_FLASH, CUSTOM");
  EXPECT_EQ(error_message([] { attention_registry().parse("FLASH_ATTN"); }, ErrorCategory::not_found),
            "Unknown attention backend: 'FLASH_ATTN'. Valid options are: REFERENCE, KOKKOS, CUDA_FLASH, HIP_FLASH, "
            "HOPPER_FLASH, CUSTOM");
  // Names are exact, as enum member names are.
  EXPECT_THROW(mla_prefill_registry().parse("reference"), Error);
  EXPECT_THROW(mla_prefill_registry().parse(""), Error);
  EXPECT_THROW(mla_prefill_registry().parse("auto"), Error);
}

TEST_F(RegistryTest, CustomMustBeRegisteredBeforeUse) {
  EXPECT_FALSE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::CUSTOM));
  EXPECT_EQ(
      error_message([] { mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM); }, ErrorCategory::not_found),
      "MLA prefill backend CUSTOM must be registered before use. Use register_mla_prefill_backend(...)");
  EXPECT_EQ(error_message([] { attention_registry().resolve(AttentionBackendKind::CUSTOM); }, ErrorCategory::not_found),
            "Attention backend CUSTOM must be registered before use. Use register_attention_backend(...)");
}

TEST_F(RegistryTest, RegisterCustom) {
  auto counters = std::make_shared<test::FakeCounters>();
  register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, make_fake_entry("MY_PREFILL", {}, counters));
  EXPECT_TRUE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::CUSTOM));

  const BackendEntry entry = mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM);
  EXPECT_EQ(entry.description.name, "MY_PREFILL");
  EXPECT_EQ(counters->factory, 0);  // resolving builds nothing
  const auto backend = entry.factory(BackendParams{});
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "MY_PREFILL");
  EXPECT_EQ(counters->factory, 1);

  // The attention registry is a separate table.
  EXPECT_FALSE(attention_registry().is_overridden(AttentionBackendKind::CUSTOM));
  EXPECT_THROW(attention_registry().resolve(AttentionBackendKind::CUSTOM), Error);
}

TEST_F(RegistryTest, OverrideAndClearABuiltinMember) {
  auto& registry = mla_prefill_registry();
  const std::string original = registry.resolve(MlaPrefillBackendKind::KOKKOS).description.name;
  EXPECT_EQ(original, "KOKKOS");
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::KOKKOS));

  register_mla_prefill_backend(MlaPrefillBackendKind::KOKKOS, make_fake_entry("KOKKOS_TUNED"));
  EXPECT_TRUE(registry.is_overridden(MlaPrefillBackendKind::KOKKOS));
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::KOKKOS).description.name, "KOKKOS_TUNED");
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::REFERENCE));  // neighbours untouched

  registry.clear_override(MlaPrefillBackendKind::KOKKOS);
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::KOKKOS));
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::KOKKOS).description.name, original);

  registry.clear_override(MlaPrefillBackendKind::KOKKOS);  // clearing twice is harmless
  EXPECT_FALSE(registry.is_overridden(MlaPrefillBackendKind::KOKKOS));
}

TEST_F(RegistryTest, AddModeRefusesAnExistingOverride) {
  auto& registry = mla_prefill_registry();
  registry.register_backend(MlaPrefillBackendKind::CUSTOM, make_fake_entry("FIRST"), RegisterMode::add);
  const std::string message = error_message(
      [&] { registry.register_backend(MlaPrefillBackendKind::CUSTOM, make_fake_entry("SECOND"), RegisterMode::add); },
      ErrorCategory::plugin);
  EXPECT_NE(message.find("CUSTOM"), std::string::npos) << message;
  EXPECT_NE(message.find("RegisterMode::replace"), std::string::npos) << message;
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::CUSTOM).description.name, "FIRST");

  registry.register_backend(MlaPrefillBackendKind::CUSTOM, make_fake_entry("SECOND"), RegisterMode::replace);
  EXPECT_EQ(registry.resolve(MlaPrefillBackendKind::CUSTOM).description.name, "SECOND");
}

TEST_F(RegistryTest, AnEntryWithoutFactoryIsRefused) {
  BackendEntry entry = make_fake_entry("FAKE");
  entry.factory = nullptr;
  error_message([&] { register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, entry); },
                ErrorCategory::invalid_argument);
  EXPECT_FALSE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::CUSTOM));
}

TEST_F(RegistryTest, ClearAllOverrides) {
  register_mla_prefill_backend(MlaPrefillBackendKind::REFERENCE, make_fake_entry("FAKE"));
  register_mla_prefill_backend(MlaPrefillBackendKind::CUSTOM, make_fake_entry("FAKE"));
  register_attention_backend(AttentionBackendKind::CUSTOM, make_fake_entry("FAKE"));
  mla_prefill_registry().clear_all_overrides();
  for (const MlaPrefillBackendKind kind : MlaPrefillRegistry::members()) {
    EXPECT_FALSE(mla_prefill_registry().is_overridden(kind)) << MlaPrefillRegistry::name(kind);
  }
  EXPECT_TRUE(attention_registry().is_overridden(AttentionBackendKind::CUSTOM));
}

TEST_F(RegistryTest, BuiltinTableNamesEveryMemberButCustom) {
  for (const MlaPrefillBackendKind kind : MlaPrefillRegistry::members()) {
    const auto entry = builtin_mla_prefill_entry(kind);
    if (kind == MlaPrefillBackendKind::CUSTOM) {
      EXPECT_FALSE(entry.has_value());
      continue;
    }
    ASSERT_TRUE(entry.has_value()) << MlaPrefillRegistry::name(kind);
    EXPECT_EQ(entry->description.name, MlaPrefillRegistry::name(kind));
    EXPECT_TRUE(static_cast<bool>(entry->factory)) << entry->description.name;
    EXPECT_FALSE(entry->description.requires_equal_qk_v) << entry->description.name;
  }
}

TEST_F(RegistryTest, AttentionEntriesAskForEqualHeadDims) {
  for (const AttentionBackendKind kind : AttentionRegistry::members()) {
    const auto entry = builtin_attention_entry(kind);
    if (kind == AttentionBackendKind::CUSTOM) {
      EXPECT_FALSE(entry.has_value());
      continue;
    }
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->description.name, AttentionRegistry::name(kind));
    EXPECT_TRUE(entry->description.requires_equal_qk_v);
  }
  // REFERENCE takes any dims: ordinary MHA (qk = v = 128) is fine, MLA's
  // 192/128 split is not attention-registry material.
  const BackendEntry reference = attention_registry().resolve(AttentionBackendKind::REFERENCE);
  const DeviceCapability host = host_capability();
  EXPECT_TRUE(validate(reference.description, host, {DType::bfloat16, MlaDims{64, 64, 128}}).empty());
  const auto reasons = validate(reference.description, host, {DType::bfloat16, deepseek_dims});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("qk_nope_head_dim=128"), std::string::npos) << reasons[0];
}

}  // namespace
}  // namespace mla
