#include <mla/backend/checks.hpp>
#include <mla/backend/registration.hpp>
#include <mla/backend/registry.hpp>
#include <mla/mla.hpp>

#include <cstdio>
#include <memory>

#include "random_tensor.hpp"  // random_tensor(queue, dtype, shape): random values on the queue's device

// A backend is a PrefillBackend: a constructor from BackendParams, a name, a
// plan (make_plan), one attention call on a plan (attend) and the merge. The
// interface checks every call's arguments against the plan and allocates the
// outputs the caller did not pass before attend runs. This one hands its
// calls to REFERENCE; yours runs its own kernels.
class MyBackend final : public mla::PrefillBackend {
 public:
  explicit MyBackend(const mla::BackendParams& params)
      : PrefillBackend(params),
        inner_(mla::builtin_mla_prefill_entry(mla::MlaPrefillBackendKind::REFERENCE)->factory(params)) {}
  std::string name() const override { return "MY_BACKEND"; }
  void merge_attn_states(mla::Queue& queue, const mla::MergeArgs& args) const override {
    mla::check_merge_args(queue, args);
    inner_->merge_attn_states(queue, args);
  }

 protected:
  // A plan: the step's sizes and lengths (the default make_plan) with
  // REFERENCE's own plan inside. A backend with kernels of its own puts its
  // work lists and workspace size here instead.
  mla::AttentionPlan make_plan(const mla::Queue& queue, const mla::PrefillMetadata& metadata,
                               const mla::PlanOptions& options) const override {
    return mla::wrap_plan(PrefillBackend::make_plan(queue, metadata, options), inner_->plan(queue, metadata, options));
  }
  // One attention call whose arguments already passed the shared checks,
  // with its outputs allocated: the new tokens (call.chunk < 0) or a chunk.
  void attend(mla::Queue& queue, const mla::AttentionCall& call) const override {
    mla::run_wrapped(*inner_, queue, call);
  }

 private:
  std::unique_ptr<mla::PrefillBackend> inner_;
};

mla::BackendDescription my_description() {
  mla::BackendDescription d;
  d.name = "MY_BACKEND";
  d.dtypes = {mla::DType::bfloat16};
  d.queue_kinds = {mla::DeviceBackend::host};  // where its operations run
  return d;
}

int main() {
  // A direct call (vLLM's register_backend(...)):
  //   mla::register_mla_prefill_backend(mla::MlaPrefillBackendKind::CUSTOM,
  //                                     mla::make_backend_entry<MyBackend>(my_description()));
  // or one line at namespace scope (vLLM's decorator; not from inside a static library):
  //   MLA_REGISTER_PREFILL_BACKEND(CUSTOM, MyBackend, my_description());
  // or for a scope, e.g. a test; the destructor restores what was there before:
  mla::BackendRegistration<MyBackend> registration{mla::MlaPrefillBackendKind::CUSTOM, my_description()};

  mla::Config config = mla::resolve_config();
  config.backend = "CUSTOM";  // as --backend CUSTOM, MLA_PREFILL_BACKEND=CUSTOM or `backend: CUSTOM`
  mla::Selector selector(config);
  mla::Selection chosen = selector.select({mla::DType::bfloat16, mla::deepseek_dims}, mla::current_platform());
  mla::Queue queue = mla::make_queue(chosen);
  auto backend = selector.create(chosen, {.num_heads = 4, .dtype = mla::DType::bfloat16});

  auto metadata = mla::PrefillMetadata::from_lengths({3, 8}, {3, 8});
  const auto bf16 = mla::DType::bfloat16;
  auto q = random_tensor(queue, bf16, {11, 4, 192}), k = random_tensor(queue, bf16, {11, 4, 192});
  auto v = random_tensor(queue, bf16, {11, 4, 128});
  mla::AttentionResult result =
      mla::run_prefill_step(*backend, queue, metadata, q.view, k.view, v.view, {}, {}, 0.0722f);
  queue.wait();
  if (!all_finite(queue, result.out)) return 1;
  std::printf("in-process backend: %s (%s) computed out %s\n", chosen.name.c_str(), backend->name().c_str(),
              result.out.describe().c_str());
  return 0;
}
