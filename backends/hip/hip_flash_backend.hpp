// HIP_FLASH: MFMA flash attention for AMD Instinct (CDNA, wave64). Runs on a
// HIP queue's stream; prepare() uploads the step's metadata and heaviest-first
// work lists, the run_* calls launch one kernel each, and the LSE merge is the
// kernel shared with CUDA_FLASH (backends/cuda_hip), compiled as HIP.
#pragma once

#include <optional>
#include <string>

#include "cuda_hip/device_metadata.hpp"
#include "flash_config.hpp"
#include "flash_params.hpp"
#include "mla/backend.hpp"

namespace mla::hip_flash {

class HipFlashBackend final : public PrefillBackend {
 public:
  // Raises Error(not_supported) for a dtype or head dims without a kernel.
  explicit HipFlashBackend(const BackendParams& params);

  std::string name() const override { return "HIP_FLASH"; }
  void prepare(Queue& queue, const PrefillMetadata& metadata) override;
  AttentionResult run_new_tokens(Queue& queue, const TensorView& q, const TensorView& k, const TensorView& v,
                                 bool return_lse, std::optional<TensorView> out = std::nullopt,
                                 std::optional<float> out_scale = std::nullopt) override;
  AttentionResult run_context_chunk(Queue& queue, int chunk_index, const TensorView& q, const TensorView& k,
                                    const TensorView& v) override;
  void merge_attn_states(Queue& queue, const MergeArgs& args) override;
  bool supports_quant_output(QuantKey key) const override;

 private:
  // Error(not_supported) unless `queue` is a HIP queue on an AMD device; for
  // runs also Error(invalid_argument) unless it is on prepare()'s device.
  void require_queue(const Queue& queue, const char* call, bool check_prepared_device) const;
  void launch(Queue& queue, const gpu_schedule::DevicePhase& phase, const TensorView& q, const TensorView& k,
              const TensorView& v, const AttentionResult& result, std::optional<float> out_scale) const;

  FlashTileConfig tile_;
  gpu_schedule::DeviceMetadata device_metadata_;
};

}  // namespace mla::hip_flash
