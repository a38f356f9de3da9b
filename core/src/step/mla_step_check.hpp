// The checks of the MLA step: the metadata when it is planned, the backend
// and the tensors against the plan when it runs. Internal to core.
#pragma once

#include <optional>

#include "mla/mla_step.hpp"

namespace mla::detail {

// Raises Error(invalid_argument) naming what is wrong with `metadata` for a
// cache of `block_size` tokens per block; returns the largest block id the
// step reads and where it is.
BlockTableEntry check_step_metadata(const MlaStepMetadata& metadata, int block_size);

// Raises Error(invalid_argument) naming both values where `backend`'s
// parameters or a tensor disagree with `plan`.
void check_mla_step(const MlaStepPlan& plan, const BackendParams& backend, const MlaStepInputs& inputs,
                    const MlaStepOutputs& outputs, const std::optional<OutputScale>& out_scale);

}  // namespace mla::detail
