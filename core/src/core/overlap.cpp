#include "core/overlap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "mla/error.hpp"

namespace mla::detail {

bool ByteSpan::intersects(const ByteSpan& other) const {
  return !empty() && !other.empty() && begin < other.end && other.begin < end;
}

ByteSpan byte_span(const TensorView& view) {
  if (view.data == nullptr || view.numel() == 0) return {};
  // Element offsets of the lowest and highest elements: each dimension adds
  // its last index times its stride to one end or the other.
  std::int64_t low = 0;
  std::int64_t high = 0;
  for (int d = 0; d < view.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    const std::int64_t reach = (view.shape[i] - 1) * view.stride[i];
    (reach < 0 ? low : high) += reach;
  }
  const auto element = static_cast<std::int64_t>(dtype_size(view.dtype));
  const auto base = reinterpret_cast<std::uintptr_t>(view.data);
  return {base + static_cast<std::uintptr_t>(low * element), base + static_cast<std::uintptr_t>((high + 1) * element)};
}

ByteSpan byte_span(const void* data, std::size_t bytes) {
  if (data == nullptr || bytes == 0) return {};
  const auto base = reinterpret_cast<std::uintptr_t>(data);
  return {base, base + bytes};
}

Operand::Operand(std::string name_, const TensorView& view)
    : name(std::move(name_)), span(byte_span(view)), view_(view) {}

Operand::Operand(std::string name_, const std::optional<TensorView>& view)
    : Operand(std::move(name_), view ? *view : TensorView{}) {}

Operand::Operand(std::string name_, const void* data, std::size_t bytes)
    : name(std::move(name_)), span(byte_span(data, bytes)), bytes_(bytes) {}

std::string Operand::describe() const {
  return view_.data != nullptr ? view_.describe() : fmt::format("{} bytes", bytes_);
}

bool Operand::overlaps_itself() const {
  if (view_.data == nullptr || view_.numel() == 0) return false;
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, extent) of extents above 1
  for (int d = 0; d < view_.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (view_.shape[i] > 1) dims.emplace_back(view_.stride[i] < 0 ? -view_.stride[i] : view_.stride[i], view_.shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t covered = 1;  // elements the dimensions so far reach, from the first
  for (const auto& [stride, extent] : dims) {
    if (stride < covered) return true;
    covered += stride * (extent - 1);
  }
  return false;
}

namespace {

void check_pair(const std::string& who, const Operand& output, const Operand& other) {
  if (!output.span.intersects(other.span)) return;
  raise(ErrorCategory::invalid_argument,
        fmt::format("{}{} overlaps {}: an output must not share memory with an input or another output ({} at {:#x}, "
                    "{} at {:#x})",
                    who.empty() ? "" : who + ": ", output.name, other.name, output.describe(), output.span.begin,
                    other.describe(), other.span.begin));
}

}  // namespace

void check_no_overlap(const std::string& who, const std::vector<Operand>& outputs, const std::vector<Operand>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].overlaps_itself()) {
      raise(ErrorCategory::invalid_argument,
            fmt::format("{}{} overlaps itself: two of its elements share memory ({})", who.empty() ? "" : who + ": ",
                        outputs[i].name, outputs[i].describe()));
    }
    for (const Operand& input : inputs) check_pair(who, outputs[i], input);
    for (std::size_t j = i + 1; j < outputs.size(); ++j) check_pair(who, outputs[i], outputs[j]);
  }
}

void add_descale_operands(std::vector<Operand>& inputs, const std::optional<InputDescales>& descales) {
  if (!descales) return;
  inputs.emplace_back("q descale", descales->q.elements());
  inputs.emplace_back("k descale", descales->k.elements());
  inputs.emplace_back("v descale", descales->v.elements());
}

std::size_t topk_mask_bytes(const TopkMask& mask) {
  if (mask.empty() || mask.batch_size <= 0 || mask.rows <= 0 || mask.words_per_row <= 0) return 0;
  const std::int64_t words =
      (mask.batch_size - 1) * mask.batch_stride + (mask.rows - 1) * mask.row_stride + mask.words_per_row;
  return static_cast<std::size_t>(words) * sizeof(std::uint32_t);
}

void add_mask_operands(std::vector<Operand>& inputs, const AttentionMask& mask) {
  if (!mask.topk.empty()) inputs.emplace_back("top-k mask", mask.topk.words, topk_mask_bytes(mask.topk));
  if (mask.has_sinks()) inputs.emplace_back("sinks", mask.sinks);
}

void check_no_overlap(const TensorView& q, const TensorView& k, const TensorView& v,
                      const std::vector<TensorView>& chunk_k, const std::vector<TensorView>& chunk_v,
                      const PrefillStepBuffers& buffers, const std::optional<InputDescales>& descales,
                      const AttentionMask& mask) {
  std::vector<Operand> inputs{{"q", q}, {"k", k}, {"v", v}};
  for (std::size_t c = 0; c < chunk_k.size(); ++c) inputs.emplace_back(fmt::format("chunk_k[{}]", c), chunk_k[c]);
  for (std::size_t c = 0; c < chunk_v.size(); ++c) inputs.emplace_back(fmt::format("chunk_v[{}]", c), chunk_v[c]);
  add_descale_operands(inputs, descales);
  add_mask_operands(inputs, mask);
  check_no_overlap(
      "run_prefill_step",
      {{"out", buffers.out}, {"lse", buffers.lse}, {"workspace", buffers.workspace, buffers.workspace_bytes}}, inputs);
}

void check_no_overlap(const MlaStepInputs& inputs, const MlaStepOutputs& outputs, const Workspace& workspace) {
  std::vector<Operand> read{
      {"q", inputs.q},         {"kv_c", inputs.kv_c},           {"k_pe", inputs.k_pe},
      {"cache", inputs.cache}, {"kv_b_proj", inputs.kv_b_proj}, {"q descale", inputs.q_descale.elements()}};
  add_mask_operands(read, inputs.mask);
  check_no_overlap("run_mla_prefill",
                   {{"out", outputs.out}, {"lse", outputs.lse}, {"workspace", workspace.data, workspace.bytes}}, read);
}

}  // namespace mla::detail
