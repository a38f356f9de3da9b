// CUDA_FLASH: tensor-core flash attention for NVIDIA sm_80 and newer.
// Runs on a CUDA queue's stream; prepare() uploads the step's metadata and
// heaviest-first work lists, the run_* calls launch one kernel each.
#pragma once

#include <optional>
#include <string>

#include "cuda_hip/device_metadata.hpp"
#include "flash_config.hpp"
#include "mla/backend.hpp"

namespace mla::cuda_flash {

class CudaFlashBackend final : public PrefillBackend {
 public:
  // Raises Error(not_supported) for a dtype or head dims without a kernel.
  explicit CudaFlashBackend(const BackendParams& params);

  std::string name() const override { return "CUDA_FLASH"; }
  void prepare(Queue& queue, const PrefillMetadata& metadata) override;
  AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                 bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<float> out_scale = std::nullopt) override;
  AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                    const TensorView& v) override;
  void merge_attn_states(Queue& queue, const MergeArgs& args) override;
  bool supports_quant_output(QuantKey key) const override;

 private:
  // Error(not_supported) unless `queue` is a CUDA queue on an sm_80+ device;
  // for runs also Error(invalid_argument) unless it is on prepare()'s device.
  void require_queue(const Queue& queue, const char* call, bool check_prepared_device) const;
  void launch(Queue& queue, const gpu_schedule::DevicePhase& phase, const TensorView& q, const TensorView& k,
              const TensorView& v, const AttentionResult& result, std::optional<float> out_scale);

  FlashTileConfig tile_;
  gpu_schedule::DeviceMetadata device_metadata_;
  // The queue prepare() uploaded on: a run on another queue of the same
  // device first waits for that upload, which no stream order covers.
  std::optional<Queue> prepared_queue_;
};

}  // namespace mla::cuda_flash
