// The checks of run_mla_prefill, before any work: internal to core.
#pragma once

#include <cstdint>

#include "mla/mla_step.hpp"

namespace mla::detail {

// The sizes of a checked step.
struct MlaStepShape {
  std::int64_t num_q = 0;
  int heads = 0, p = 0, r = 0, v = 0, latent = 0;
  std::int64_t num_blocks = 0;
  int block_size = 0;
};

// Raises Error(invalid_argument) naming what is wrong; returns the sizes.
MlaStepShape check_mla_step(const BackendParams& params, const MlaStepMetadata& metadata, const MlaStepInputs& inputs,
                            const MlaStepOutputs& outputs);

}  // namespace mla::detail
