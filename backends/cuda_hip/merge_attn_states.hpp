// The LSE merge of two partial attentions (docs/contract.md §3) on a GPU queue.
// Vendor-neutral declaration: the CUDA and the HIP backend call it from plain
// C++; the kernel lives in merge_attn_states.cu, compiled once per vendor.
#pragma once

#include "gpu_namespace.hpp"
#include "mla/backend.hpp"
#include "mla/queue.hpp"

namespace mla::MLA_GPU_NAMESPACE {

// Enqueues the merge on `queue`'s stream. `args` must have passed
// check_merge_args(queue, args). Inputs may be float32, float16 or bfloat16;
// out has their dtype, or float8_e4m3 with args.out_scale.
void merge_attn_states(Queue& queue, const MergeArgs& args);

}  // namespace mla::MLA_GPU_NAMESPACE
