// In-process registration by application code: the one-line macro (vLLM's
// decorator), the scoped BackendRegistration, and make_backend_entry with
// register_mla_prefill_backend (vLLM's direct call).
#include <cmath>

#include "mla/backend/checks.hpp"
#include "mla/backend/registration.hpp"
#include "plugin_support.hpp"

namespace {

// An application's backend: REFERENCE's arithmetic under its own name, so a
// test can tell it was selected and that it computes.
template <const char* Name>
class WrappedReference final : public mla::PrefillBackend {
 public:
  explicit WrappedReference(const mla::BackendParams& params)
      : PrefillBackend(params),
        inner_(mla::builtin_mla_prefill_entry(mla::MlaPrefillBackendKind::REFERENCE)->factory(params)) {}
  std::string name() const override { return Name; }
  void merge_attn_states(mla::Queue& queue, const mla::MergeArgs& args) const override {
    inner_->merge_attn_states(queue, args);
  }

 protected:
  mla::AttentionPlan make_plan(const mla::Queue& queue, const mla::PrefillMetadata& metadata,
                               const mla::PlanOptions& options) const override {
    return mla::wrap_plan(PrefillBackend::make_plan(queue, metadata, options), inner_->plan(queue, metadata, options));
  }
  void attend(mla::Queue& queue, const mla::AttentionCall& call) const override {
    mla::run_wrapped(*inner_, queue, call);
  }

 private:
  std::unique_ptr<mla::PrefillBackend> inner_;
};

constexpr char macro_name[] = "IN_PROCESS_MACRO";
constexpr char scoped_name[] = "IN_PROCESS_SCOPED";
constexpr char direct_name[] = "IN_PROCESS_DIRECT";
using MacroBackend = WrappedReference<macro_name>;
using ScopedBackend = WrappedReference<scoped_name>;
using DirectBackend = WrappedReference<direct_name>;

mla::BackendDescription describe(const char* name) {
  mla::BackendDescription description;
  description.name = name;
  description.dtypes = {mla::DType::float32, mla::DType::bfloat16};
  return description;
}

}  // namespace

// Registered when the program starts, before main().
MLA_REGISTER_PREFILL_BACKEND(CUSTOM, MacroBackend, describe(macro_name));

namespace mla::plugin_test {
namespace {

std::string entry_name(MlaPrefillBackendKind kind) { return mla_prefill_registry().resolve(kind).description.name; }

TEST(InProcess, MacroRegistersCustomAtStartupAndItRuns) {
  ASSERT_TRUE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::CUSTOM));
  EXPECT_EQ(entry_name(MlaPrefillBackendKind::CUSTOM), macro_name);

  Selector selector(Config::builtin_defaults());
  const Selection selection = selector.select({DType::float32, MlaDims{48, 16, 32}}, host_capability(), "CUSTOM");
  BackendParams params;
  params.num_heads = 3;
  params.dims = MlaDims{48, 16, 32};
  params.dtype = DType::float32;
  const std::unique_ptr<PrefillBackend> backend = selector.create(selection, params);
  EXPECT_EQ(backend->name(), macro_name);
  std::mt19937_64 rng(5);
  PrefillMetadata metadata = PrefillMetadata::from_lengths({3, 0, 11}, {3, 0, 11});
  metadata.add_chunk({4, 2, 0});
  expect_matches_reference(*backend, params, 0.125f, make_step(rng, params, std::move(metadata)));

  // Its description is what the application wrote: fp16 was left out.
  EXPECT_EQ(validate(selection.entry.description, host_capability(), {DType::float16, deepseek_dims}),
            (std::vector<std::string>{"dtype float16 not supported"}));
}

TEST(InProcess, ScopedRegistrationRestoresWhatWasThere) {
  {
    const BackendRegistration<ScopedBackend> registration{MlaPrefillBackendKind::CUSTOM, describe(scoped_name)};
    EXPECT_EQ(entry_name(MlaPrefillBackendKind::CUSTOM), scoped_name);
    {
      const BackendRegistration<DirectBackend> nested{MlaPrefillBackendKind::CUSTOM, describe(direct_name)};
      EXPECT_EQ(entry_name(MlaPrefillBackendKind::CUSTOM), direct_name);
    }
    EXPECT_EQ(entry_name(MlaPrefillBackendKind::CUSTOM), scoped_name);
  }
  EXPECT_EQ(entry_name(MlaPrefillBackendKind::CUSTOM), macro_name);

  {
    const BackendRegistration<ScopedBackend> registration{MlaPrefillBackendKind::KOKKOS, describe(scoped_name)};
    EXPECT_EQ(entry_name(MlaPrefillBackendKind::KOKKOS), scoped_name);
  }
  EXPECT_FALSE(mla_prefill_registry().is_overridden(MlaPrefillBackendKind::KOKKOS));
  EXPECT_EQ(entry_name(MlaPrefillBackendKind::KOKKOS), "KOKKOS");
}

TEST(InProcess, ScopedRegistrationLeavesALaterRegistrationAlone) {
  {
    const BackendRegistration<ScopedBackend> registration{MlaPrefillBackendKind::KOKKOS, describe(scoped_name)};
    register_mla_prefill_backend(MlaPrefillBackendKind::KOKKOS,
                                 make_backend_entry<DirectBackend>(describe(direct_name)));
  }
  EXPECT_EQ(entry_name(MlaPrefillBackendKind::KOKKOS), direct_name);
  mla_prefill_registry().clear_override(MlaPrefillBackendKind::KOKKOS);
}

TEST(InProcess, AddModeRefusesATakenMember) {
  const std::string message = error_of(
      [] {
        const BackendRegistration<ScopedBackend> registration{MlaPrefillBackendKind::CUSTOM, describe(scoped_name),
                                                              RegisterMode::add};
      },
      ErrorCategory::plugin);
  EXPECT_NE(message.find("CUSTOM is already registered"), std::string::npos) << message;
  EXPECT_EQ(entry_name(MlaPrefillBackendKind::CUSTOM), macro_name);
}

TEST(InProcess, DirectCallWithMakeBackendEntry) {
  register_mla_prefill_backend(MlaPrefillBackendKind::HIP_FLASH,
                               make_backend_entry<DirectBackend>(describe(direct_name)));
  Selector selector(Config::builtin_defaults());
  // HIP_FLASH now names the application's host backend: valid on the host.
  const Selection selection = selector.select({DType::bfloat16, deepseek_dims}, host_capability(), "HIP_FLASH");
  BackendParams params;
  params.dtype = DType::bfloat16;
  EXPECT_EQ(selector.create(selection, params)->name(), direct_name);
  mla_prefill_registry().clear_override(MlaPrefillBackendKind::HIP_FLASH);
  EXPECT_EQ(entry_name(MlaPrefillBackendKind::HIP_FLASH), "HIP_FLASH");
}

TEST(InProcess, AttentionRegistryToo) {
  {
    const BackendRegistration<ScopedBackend, AttentionBackendKind> registration{AttentionBackendKind::CUSTOM,
                                                                                describe(scoped_name)};
    EXPECT_EQ(attention_registry().resolve(AttentionBackendKind::CUSTOM).description.name, scoped_name);
    EXPECT_FALSE(mla_prefill_registry().resolve(MlaPrefillBackendKind::CUSTOM).description.name == scoped_name);
  }
  EXPECT_FALSE(attention_registry().is_overridden(AttentionBackendKind::CUSTOM));
}

}  // namespace
}  // namespace mla::plugin_test
