// The LSE merge kernel of backends/cuda_hip run by the emulator.
#pragma once

#include "mla/backend.hpp"

namespace mla::simt {

// `args` must have passed check_merge_args.
void merge_attn_states_emulated(const MergeArgs& args);

}  // namespace mla::simt
