// The flash-attention backend class shared by CUDA_FLASH and HIP_FLASH: one
// source, two vendors. Plain C++ (no vendor header): each vendor folder builds
// it with a FlashVendor naming its queue kind, device check, tile lookup,
// kernel launch and LSE merge. prepare() uploads the step's metadata and
// heaviest-first work lists; the run_* calls launch one kernel each.
#pragma once

#include <optional>
#include <string>

#include "cuda_hip/device_metadata.hpp"
#include "cuda_hip/flash_params.hpp"
#include "mla/backend.hpp"
#include "mla/backend/latents.hpp"

namespace mla::gpu {

// What the backend needs of a vendor's kernel for one (qk, v) head-dim pair.
struct KernelTile {
  int head_dim_qk = 0;
  int head_dim_v = 0;
  int block_rows = 0;  // query rows per block (Br): the work-list tile height
  int block_cols = 0;  // keys per iteration (Bc): the work-list tile width
};

struct FlashVendor {
  const char* backend_name;     // "CUDA_FLASH", in name() and every message
  DeviceBackend queue_backend;  // the only queue kind the backend accepts (its entry's queue_kinds)
  // Why the queue's device cannot run the kernels ("" when it can), checked
  // before every call; null when the queue kind is the whole requirement.
  std::string (*device_gap)(const DeviceCapability& device);
  // The kernel tile for (dtype, qk, v), or nullopt when none was compiled.
  std::optional<KernelTile> (*find_tile)(DType dtype, int head_dim_qk, int head_dim_v);
  // Enqueues one attention kernel on `queue`'s stream.
  void (*launch)(Queue& queue, const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v);
  // Enqueues the LSE merge (backends/cuda_hip/merge_attn_states.hpp).
  void (*merge)(Queue& queue, const MergeArgs& args);
  // Enqueue the MLA step's gather and up-projection (backends/cuda_hip/latents.hpp).
  void (*gather)(Queue& queue, const LatentGather& gather, const TensorView& latents, const TensorView& k);
  void (*project)(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                  const TensorView& v);
};

class GpuFlashBackend final : public PrefillBackend {
 public:
  // Raises Error(not_supported) for a dtype or head dims without a kernel.
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
  void gather_latents(Queue& queue, const LatentGather& gather, const TensorView& latents,
                      const TensorView& k) override;
  void project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                       const TensorView& v) override;
  bool supports_quant_output(QuantKey key) const override;

 private:
  // Error(not_supported) unless `queue` is the vendor's queue kind on a device
  // it can run; for runs also Error(invalid_argument) unless it is on
  // prepare()'s device.
  void require_queue(const Queue& queue, const char* call, bool check_prepared_device) const;
  void check_kernel_layout(const TensorView& view, const char* what) const;
  void launch(Queue& queue, const gpu::DevicePhase& phase, const TensorView& q, const TensorView& k,
              const TensorView& v, float scale, const AttentionResult& result, std::optional<OutputScale> out_scale);

  FlashVendor vendor_;
  KernelTile tile_;
  gpu::DeviceMetadata device_metadata_;
  // The queue prepare() uploaded on: a run on a queue over another stream of
  // the same device is ordered after that upload with an event (no stream
  // order covers it), and the host does not wait.
  std::optional<Queue> prepared_queue_;
  // A run since prepare() was on another stream than prepared_queue_'s.
  bool ran_on_other_stream_ = false;
};

}  // namespace mla::gpu
