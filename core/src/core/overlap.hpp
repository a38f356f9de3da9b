// Refusing outputs that share memory with an input or with another output: a
// kernel that writes what it still reads gives wrong results without a word.
// Internal to core; the argument checks of the backends and steps call it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mla/backend.hpp"
#include "mla/mla_step.hpp"
#include "mla/tensor.hpp"

namespace mla::detail {

// The bytes from a view's lowest-addressed element to the end of its
// highest-addressed one, whatever the strides' signs and order. Empty (begin
// == end) for an empty view, a view with no elements or a null pointer. Two
// views whose spans intersect are treated as overlapping even when their
// strides interleave without sharing an element: the check errs towards
// refusing.
struct ByteSpan {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool empty() const { return begin == end; }
  bool intersects(const ByteSpan& other) const;
};

ByteSpan byte_span(const TensorView& view);
ByteSpan byte_span(const void* data, std::size_t bytes);

// A named tensor or raw buffer of a call, for the message.
struct Operand {
  Operand(std::string name, const TensorView& view);
  Operand(std::string name, const std::optional<TensorView>& view);
  Operand(std::string name, const void* data, std::size_t bytes);

  std::string name;
  ByteSpan span;
  // Described only for the message: the check runs on every call.
  std::string describe() const;
  // Whether two indices of a tensor operand can address one element (a zero
  // stride over an extent above 1, a head stride inside a row): taken in
  // order of stride, each dimension must step past all the ones below it.
  // Errs towards true for exotic interleavings, as the spans do.
  bool overlaps_itself() const;

 private:
  TensorView view_;        // a tensor operand
  std::size_t bytes_ = 0;  // a raw buffer operand
};

// Raises Error(invalid_argument) "<who>: out overlaps q (...)" naming both
// when an output's span intersects an input's or another output's, and
// "<who>: out overlaps itself (...)" for an output whose elements alias. Inputs may
// share memory with each other (k and v as views of one cache, say).
void check_no_overlap(const std::string& who, const std::vector<Operand>& outputs, const std::vector<Operand>& inputs);

// Appends a call's descale tensors to its inputs as "q descale", "k
// descale" and "v descale" (a 0-d one as its element; nothing without
// descales).
void add_descale_operands(std::vector<Operand>& inputs, const std::optional<InputDescales>& descales);

// Appends a call's top-k mask words ("top-k mask") and sinks ("sinks") to
// its inputs (nothing for an empty mask).
void add_mask_operands(std::vector<Operand>& inputs, const AttentionMask& mask);

// The bytes a top-k mask's rows take, from its first word to the end of its
// last row (0 for an empty mask).
std::size_t topk_mask_bytes(const TopkMask& mask);

// The same for whole steps: the caller's out, lse and workspace against every
// tensor the step reads.
void check_no_overlap(const TensorView& q, const TensorView& k, const TensorView& v,
                      const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v,
                      const PrefillStepBuffers& buffers, const std::optional<InputDescales>& descales,
                      const AttentionMask& mask = {});
void check_no_overlap(const MlaStepInputs& inputs, const MlaStepOutputs& outputs, const Workspace& workspace);

}  // namespace mla::detail
