// The flash-attention backend class shared by CUDA_FLASH and HIP_FLASH: one
// source, two vendors. Plain C++ (no vendor header): each vendor folder builds
// it with a FlashVendor naming its queue kind, kernel chooser, kernel launch
// and LSE merge. prepare() uploads the step's metadata and heaviest-first
// work lists; the run_* calls launch one kernel each.
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
};

class GpuFlashBackend final : public PrefillBackend {
 public:
  // Raises Error(not_supported) with the chooser's reason when no kernel
  // serves the params' dtype and head dims.
  GpuFlashBackend(const BackendParams& params, const FlashVendor& vendor);

  std::string name() const override { return vendor_.backend_name; }
  void prepare(Queue& queue, const PrefillMetadata& metadata) override;
  // Binds the caller's device arrays: nothing is copied, allocated or waited for.
  void prepare_device(Queue& queue, const DevicePrefillMetadata& metadata) override;
  AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                 float scale, bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<OutputScale> out_scale = std::nullopt,
                                 std::optional<TensorView> lse = std::nullopt) override;
  AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                    const TensorView& v, float scale, std::optional<TensorView> out = std::nullopt,
                                    std::optional<TensorView> lse = std::nullopt) override;
  void merge_attn_states(Queue& queue, const MergeArgs& args) override;
  // bfloat16 and float16 latents stay in that dtype.
  DType latent_dtype(DType compute) const override;
  void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                      const TensorView& k) override;
  void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                       const TensorView& v) override;
  bool supports_quant_output(QuantKey key) const override;

 private:
  // Error(not_supported) unless `queue` is the vendor's queue kind on a device
  // the chooser accepts; for runs also Error(invalid_argument) unless it is on
  // prepare()'s device. Returns the chooser's tile for that device.
  KernelTile require_queue(const Queue& queue, const char* call, bool check_prepared_device) const;
  // What both attention calls check of their operands (named in order q, k,
  // v, out) besides the shared argument checks: the kernels' layout.
  struct Operand {
    const char* name;
    const TensorView* view;  // null: not given
  };
  void check_kernel_layouts(std::initializer_list<Operand> operands) const;
  // `call` names the call in the debug log ("new tokens", "context chunk 2").
  void launch(Queue& queue, const gpu::DevicePhase& phase, const TensorView& q, const TensorView& k,
              const TensorView& v, float scale, const AttentionResult& result, std::optional<OutputScale> out_scale,
              const std::string& call);
  // Split-KV (split_kv.hpp): cuts the launch's keys into ranges when its
  // blocks cannot fill the device and the lent scratch holds the partials;
  // logs the choice at debug level.
  void split_keys(const Queue& queue, FlashParams& p, const gpu::DevicePhase& phase, const std::string& call) const;

  FlashVendor vendor_;
  // The chooser's tile for the params' dtype and dims: for no device until
  // prepare(), then for the prepared queue's device (HIP_FLASH's differs by
  // gfx generation in keys per tile, never in query rows per block).
  KernelTile kernel_;
  std::unique_ptr<LatentProjector> projector_;  // vendor_.make_projector's, if any
  gpu::DeviceMetadata device_metadata_;
  // The queue prepare() uploaded on: a run on a queue over another stream of
  // the same device is ordered after that upload with an event (no stream
  // order covers it), and the host does not wait.
  std::optional<Queue> prepared_queue_;
  // A run since prepare() was on another stream than prepared_queue_'s.
  bool ran_on_other_stream_ = false;
};

}  // namespace mla::gpu
