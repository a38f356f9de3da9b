// For backend authors: the checks every backend runs on its arguments, so that
// all backends reject the same bad input with the same message, and the
// helpers that turn a call's optional outputs into an AttentionResult.
// Engine callers do not need this header (mla/mla.hpp leaves it out).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mla/backend.hpp"

namespace mla {

// Raises Error(invalid_argument) naming `what` unless `view` has the given rank,
// dtype and shape (a shape entry of -1 matches any size).
void check_tensor(const TensorView& view, const char* what, DType dtype, std::initializer_list<std::int64_t> shape);

// Raises Error(invalid_argument) naming `what` when a non-empty `view` lives in
// memory `queue` cannot access (Queue::can_access), e.g. host memory on a GPU queue.
void check_accessible(const Queue& queue, const TensorView& view, const char* what);

// The check backends run on every call: Error(not_supported) "<who>
// <operation> needs a host queue; got a cuda queue (...)" unless `queue` is
// of one of `kinds`.
void require_queue_kind(std::string_view who, std::string_view operation, const std::vector<DeviceBackend>& kinds,
                        const Queue& queue);

// Raises Error(invalid_argument) naming `what` unless `cu` has at least one
// entry, starts at 0 and never decreases, and its last entry equals `total`
// (pass total < 0 to skip that check).
void check_cu_seqlens(const std::vector<std::int32_t>& cu, const char* what, std::int64_t total = -1);

// Checks the metadata as a whole (equal batch sizes of q, k and every chunk).
void check_metadata(const PrefillMetadata& metadata);

// Host-side checks of the sizes and pointers (the arrays are not read):
// raises Error(invalid_argument).
void check_device_metadata(const DevicePrefillMetadata& metadata);

// Max difference between neighbouring entries; 0 for fewer than two entries
// (no sequence) or when no difference is positive.
int max_seqlen(const std::vector<std::int32_t>& cu);

// Copies device metadata's arrays to the host through `queue`, waits for the
// copy (on the host queue a plain read), and checks the result as
// check_metadata does, plus the sizes against the arrays' last entries.
PrefillMetadata read_device_metadata(Queue& queue, const DevicePrefillMetadata& metadata);

// What PrefillBackend::run_new_tokens checks before a backend's attend():
// the shapes, dtypes and scale against `backend`'s parameters and `plan`'s
// sizes, that out and lse share no memory with q, k, v or each other, and
// that `queue` reaches every tensor; raises Error(invalid_argument)
// (Error(not_supported) for an out_scale the backend cannot write).
void check_new_tokens_args(const PrefillBackend& backend, const AttentionPlan& plan, const Queue& queue,
                           const TensorView& q, const TensorView& k, const TensorView& v, float scale,
                           const std::optional<TensorView>& out, const std::optional<OutputScale>& out_scale,
                           const std::optional<TensorView>& lse = std::nullopt,
                           const std::optional<InputDescales>& descales = std::nullopt);
// The same for run_context_chunk, against chunk `chunk_index` of the plan.
void check_chunk_args(const PrefillBackend& backend, const AttentionPlan& plan, const Queue& queue, int chunk_index,
                      const TensorView& q, const TensorView& k, const TensorView& v, float scale,
                      const std::optional<TensorView>& out = std::nullopt,
                      const std::optional<TensorView>& lse = std::nullopt,
                      const std::optional<InputDescales>& descales = std::nullopt);

// What PrefillBackend's calls check of an AttentionMask after the tensors
// (docs/contract.md §12): Error(not_supported) from a backend that does not
// take masks (`who` names the call), then the top-k mask's shape against the
// plan's batch and lengths (where the plan holds them), its strides and
// alignment, the window, the sinks' shape and dtype, that the queue reaches
// them and that out and lse overlap neither; Error(invalid_argument).
void check_attention_mask(const PrefillBackend& backend, const AttentionPlan& plan, const Queue& queue,
                          const AttentionMask& mask, const std::optional<TensorView>& out,
                          const std::optional<TensorView>& lse, const char* who);

// Raises Error(invalid_argument) "<who>: sinks must be float32[H] ..."
// unless `sinks` is float32 [heads] with data: the sinks of an attention
// call's mask and of a merge (docs/contract.md §12).
void check_sinks(const TensorView& sinks, std::int64_t heads, const std::string& who);

// Where one call's rows and keys lie in each sequence's whole key range
// (§12): sequence b's query i is at position query[b] + i, its key j of the
// call at key[b] + j. `chunk` < 0: the new tokens; else that context chunk.
struct MaskPositions {
  std::vector<std::int64_t> query;
  std::vector<std::int64_t> key;
};
MaskPositions mask_positions(const PrefillMetadata& metadata, int chunk);

// The sink logits `sinks` (float32 [heads]) read through `queue`: each
// must be finite or -inf; Error(invalid_argument) naming the head
// otherwise. Empty for an empty view.
std::vector<float> read_sinks(Queue& queue, const TensorView& sinks, int heads);

// For a backend that hands its attention calls to another one (a wrapper,
// as in examples/cpp/in_process_backend.cpp): wrap_plan keeps `inner` (the
// other backend's plan of the same step) inside `outer` (the wrapper's, from
// PrefillBackend::make_plan) with its words and workspace, and run_wrapped
// runs a call of the wrapper's plan on the other backend with that plan.
AttentionPlan wrap_plan(AttentionPlan outer, AttentionPlan inner);
void run_wrapped(const PrefillBackend& inner, Queue& queue, const AttentionCall& call);

// Raises Error(invalid_argument) "<what> has no data: ..." for a view with
// elements and a null pointer, and "<what> has a negative stride: ..." for
// a negative stride: what every tensor of every call must satisfy.
void check_has_data(const TensorView& view, const char* what);

// Raises Error(not_supported) "<backend> cannot write float8_e4m3 <output>
// (out_scale was given)" when an out_scale is given and `backend` cannot
// write fp8 (supports_quant_output).
void check_quant_output(const PrefillBackend& backend, bool has_out_scale, const char* output);

// Checks shapes, dtypes and the fp8 scale of a merge, and that out and out_lse
// share no memory with an input or each other; raises Error(invalid_argument).
void check_merge_args(const MergeArgs& args);
// The same, plus: every tensor is in memory `queue` can access.
void check_merge_args(const Queue& queue, const MergeArgs& args);
// The same, plus: an out_scale raises Error(not_supported) when `backend`
// cannot write float8_e4m3 (supports_quant_output), as run_new_tokens does.
void check_merge_args(const PrefillBackend& backend, const Queue& queue, const MergeArgs& args);

// The caller's out and lse views, and what is missing allocated on `queue`
// for `backend`'s heads and v_head_dim: out in `out_dtype` (q's dtype, or fp8
// with an out_scale), lse when return_lse. Raises Error(invalid_argument) for
// an lse without return_lse.
AttentionResult allocate_result(const PrefillBackend& backend, Queue& queue, std::int64_t num_q, bool return_lse,
                                std::optional<TensorView> out, DType out_dtype,
                                std::optional<TensorView> lse = std::nullopt);

// The scale's value on the host, for backends that compute or hand off on the
// host (REFERENCE, KOKKOS, plugins): a host scale as it is (the backend calls
// check it), a device scale read back through `queue` (one wait on a GPU
// queue) and checked: finite and positive, else Error(invalid_argument).
float read_out_scale(Queue& queue, const OutputScale& scale);

// A descale's value for each of `heads` heads on the host, for the same
// backends: a host value repeated, or a tensor's one or `heads` values read
// through `queue` (one wait on a GPU queue). Each must be finite and
// positive, else Error(invalid_argument) naming `what` ("q", "k", "v") and
// the head.
std::vector<float> read_descales(Queue& queue, const Descale& descale, int heads, const char* what);

}  // namespace mla
