// The flash-attention backend class shared by CUDA_FLASH and HIP_FLASH: one
// source, two vendors. Plain C++ (no vendor header): each vendor folder builds
// it with a FlashVendor naming its queue kind, kernel chooser, kernel launch
// and LSE merge. A plan holds the kernel tile, the step's cu_seqlens and
// heaviest-first work lists (words for the workspace) and each phase's
// split-KV count; a call launches one kernel from it and keeps nothing.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "cuda_hip/device_metadata.hpp"
#include "cuda_hip/flash_params.hpp"
#include "cuda_hip/kernel_choice.hpp"
#include "mla/backend.hpp"
#include "mla/backend/latents.hpp"

namespace mla::gpu {

// An up-projection with state that lives as long as its backend (a library
// handle, chosen algorithms, scratch memory). A backend's calls never overlap,
// so it needs no lock.
class LatentProjector {
 public:
  virtual ~LatentProjector() = default;
  // The arguments passed check_latent_projection; enqueues on `queue`'s stream.
  virtual void project(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                       const TensorView& v) = 0;
};

struct FlashVendor {
  const char* backend_name;     // "CUDA_FLASH", in name() and every message
  DeviceBackend queue_backend;  // the only queue kind the backend accepts (its entry's queue_kinds)
  // The kernel, its shared memory and whether it runs on a device: asked by
  // the constructor (no device) and before every call (the queue's device).
  KernelChooser choose;
  // Enqueues one attention kernel, the one `kernel` names, on `queue`'s stream.
  void (*launch)(Queue& queue, const FlashParams& params, DType dtype, const KernelTile& kernel);
  // Enqueues the LSE merge (backends/cuda_hip/merge_attn_states.hpp).
  void (*merge)(Queue& queue, const MergeArgs& args);
  // Enqueue the MLA step's gather and up-projection (backends/cuda_hip/latents.hpp).
  void (*gather)(Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k);
  void (*project)(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                  const TensorView& v);
  // Null: `project` serves every projection. Otherwise the backend's
  // constructor makes one projector (touching no device) and every
  // projection goes to it instead.
  std::unique_ptr<LatentProjector> (*make_projector)();
  // Whether `launch` runs split-KV launches (FlashParams::num_splits > 1:
  // the kernel over key ranges, then the merge of their partials). False:
  // the backend never splits.
  bool splits_keys = false;
  // Enqueues the MLA step's FP8 quantisation (backends/cuda_hip/latents.hpp,
  // quantise_e4m3); null: the backend refuses the FP8 attention mode's step.
  void (*quantise)(Queue& queue, const TensorView& from, const TensorView& to, std::optional<float> scale,
                   float* scratch) = nullptr;
  // Whether `launch` and `merge` take docs/contract.md §12's masks,
  // windows and sinks (FlashParams::mask, MergeArgs::sinks). False: the
  // backend refuses them.
  bool masks = false;
};

class GpuFlashBackend final : public PrefillBackend {
 public:
  // Raises Error(not_supported) with the chooser's reason when no kernel
  // serves the params' dtype and head dims.
  GpuFlashBackend(const BackendParams& params, const FlashVendor& vendor);

  std::string name() const override { return vendor_.backend_name; }
  void merge_attn_states(Queue& queue, const MergeArgs& args) const override;
  // bfloat16 and float16 latents stay in that dtype.
  DType latent_dtype(DType compute) const override;
  void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                      const TensorView& k) const override;
  void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                       const TensorView& v) const override;
  bool supports_quant_output(QuantKey key) const override;
  // The vendor's `masks`. A top-k mask or window also needs a plan made
  // from host metadata, which holds the positions (§12).
  bool takes_attention_masks() const override { return vendor_.masks; }
  // On the queue's stream; a found scale is a tensor over scratch[1].
  Descale quantise_e4m3(Queue& queue, const TensorView& from, const TensorView& to, std::optional<float> scale,
                        float* scratch) const override;

 protected:
  // Error(not_supported) unless `queue` is the vendor's queue kind.
  void check_queue(const Queue& queue, const char* operation) const override;
  // The chooser's tile for the queue's device (Error(not_supported) with its
  // reason where none serves), the work lists and the split decisions.
  AttentionPlan make_plan(const Queue& queue, const PrefillMetadata& metadata,
                          const PlanOptions& options) const override;
  // Binds the caller's device arrays: nothing is read, copied or waited for.
  AttentionPlan make_device_plan(Queue& queue, const DevicePrefillMetadata& metadata,
                                 const PlanOptions& options) const override;
  void attend(Queue& queue, const AttentionCall& call) const override;

 private:
  // What both attention calls check of their operands (named in order q, k,
  // v, out) besides the shared argument checks: the kernels' layout.
  struct Operand {
    const char* name;
    const TensorView* view;  // null: not given
  };
  void check_kernel_layouts(std::initializer_list<Operand> operands) const;
  // Split-KV (split_kv.hpp): the ranges each phase's launch cuts its keys
  // into when its blocks cannot fill the device and the plan holds the
  // partials (options.split_keys); logs each choice at debug level.
  void plan_splits(const Queue& queue, AttentionPlan& plan, FlashPlan& flash, const PlanOptions& options) const;

  FlashVendor vendor_;
  // A projector with state that lives as long as the backend (a library
  // handle, chosen algorithms): a resource, not per-call state.
  std::unique_ptr<LatentProjector> projector_;  // vendor_.make_projector's, if any
};

}  // namespace mla::gpu
