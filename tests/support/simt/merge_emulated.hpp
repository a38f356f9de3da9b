// The LSE merge kernel of backends/cuda_hip run by the emulator.
#pragma once

#include "cuda_hip/flash_params.hpp"
#include "mla/backend.hpp"

namespace mla::simt {

// `args` must have passed check_merge_args.
void merge_attn_states_emulated(const MergeArgs& args);

// The merge of a split launch's partials (cuda_hip/split_merge_kernel.hpp).
void merge_splits_emulated(const gpu::FlashParams& params, DType dtype, int v_head_dim);

}  // namespace mla::simt
