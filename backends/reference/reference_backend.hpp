// The REFERENCE backend: exact attention on the host, the oracle every other
// backend is tested against. Inputs are read in their own dtype, every sum is
// accumulated in fp64, and only the final value is rounded to the output dtype.
// It reads memory directly, so it runs on the host queue only.
#pragma once

#include <string>
#include <vector>

#include "host/host_backend.hpp"
#include "mla/backend.hpp"

namespace mla::reference {

using AttentionProblem = detail::HostAttentionProblem;

void attention(const AttentionProblem& problem);

// docs/contract.md §3 on arguments that passed check_merge_args, with
// args.sinks read into `sinks` (§12; empty: none).
void merge(const MergeArgs& args, const std::vector<float>& sinks);

class ReferenceBackend final : public detail::HostBackend {
 public:
  explicit ReferenceBackend(const BackendParams& params) : HostBackend(params) {}
  std::string name() const override { return "REFERENCE"; }
  // The MLA step's up-projection in fp64 (reference_latents.cpp).
  void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                       const TensorView& v) const override;

 protected:
  void attention(const AttentionProblem& problem) const override { reference::attention(problem); }
  void merge(const MergeArgs& args, const std::vector<float>& sinks) const override { reference::merge(args, sinks); }
};

}  // namespace mla::reference
