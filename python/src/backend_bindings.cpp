// Backend calls from Python. Outputs are always the caller's tensors (the
// Python package allocates them with the inputs' library), so nothing the
// library returns needs to outlive a call; the GIL is released while the
// backend works.
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backend_object.hpp"
#include "bindings.hpp"
#include "mla/backend/checks.hpp"
#include "mla/mla.hpp"
#include "tensors.hpp"

namespace mla::python {
namespace {

namespace py = pybind11;

std::vector<std::int32_t> cu_seqlens_of(const std::vector<std::int64_t>& values, const std::string& what) {
  std::vector<std::int32_t> cu;
  cu.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > std::numeric_limits<std::int32_t>::max()) {
      raise(ErrorCategory::invalid_argument,
            what + "[" + std::to_string(i) + "] = " + std::to_string(values[i]) + " is outside 0..2^31-1");
    }
    cu.push_back(static_cast<std::int32_t>(values[i]));
  }
  return cu;
}

using CuList = std::vector<std::int64_t>;

// Host metadata from Python lists; check_metadata runs in prepare().
PrefillMetadata metadata_of(const CuList& cu_q, const std::optional<CuList>& cu_k, const std::vector<CuList>& chunks,
                            std::optional<int> max_q, std::optional<int> max_k, bool causal) {
  PrefillMetadata metadata;
  metadata.cu_seqlens_q = cu_seqlens_of(cu_q, "cu_seqlens_q");
  metadata.cu_seqlens_k = cu_k ? cu_seqlens_of(*cu_k, "cu_seqlens_k") : metadata.cu_seqlens_q;
  metadata.max_seqlen_q = max_q.value_or(max_seqlen(metadata.cu_seqlens_q));
  metadata.max_seqlen_k = max_k.value_or(max_seqlen(metadata.cu_seqlens_k));
  metadata.causal = causal;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    PrefillMetadata::Chunk chunk;
    chunk.cu_seqlens_k = cu_seqlens_of(chunks[i], "chunks[" + std::to_string(i) + "]");
    chunk.max_seqlen_k = max_seqlen(chunk.cu_seqlens_k);
    metadata.chunks.push_back(std::move(chunk));
  }
  return metadata;
}

// None, a float, or a one-element float32 tensor the queue's device reads.
struct ScaleArgument {
  std::optional<BorrowedTensor> tensor;
  std::optional<OutputScale> scale;
};

ScaleArgument scale_of(py::handle object, const Queue& queue, py::handle stream) {
  ScaleArgument argument;
  if (object.is_none()) return argument;
  if (py::isinstance<py::float_>(object) || py::isinstance<py::int_>(object)) {
    argument.scale = OutputScale(object.cast<float>());
    return argument;
  }
  argument.tensor = borrow_tensor(object, "output_scale", queue, stream);
  const TensorView& view = argument.tensor->view;
  if (view.dtype != DType::float32 || view.numel() != 1) {
    raise(ErrorCategory::invalid_argument,
          "output_scale must be a float or a one-element float32 tensor, got " + view.describe());
  }
  argument.scale = OutputScale::on_device(static_cast<const float*>(view.data));
  return argument;
}

// The descales of float8_e4m3 q, k and v: a (q, k, v) tuple whose entries
// are None (1), a float, or a float32 tensor of one value or one per head
// the queue's device reads; None for no descales at all.
struct DescaleArguments {
  std::vector<BorrowedTensor> tensors;  // kept alive for the call
  std::optional<InputDescales> descales;
};

DescaleArguments descales_of(py::handle object, const Queue& queue, py::handle stream) {
  DescaleArguments argument;
  if (object.is_none()) return argument;
  const py::tuple triple = py::reinterpret_borrow<py::tuple>(object);
  if (triple.size() != 3) raise(ErrorCategory::internal, "descales_of: a (q, k, v) tuple is expected");
  InputDescales descales;
  Descale* slots[3] = {&descales.q, &descales.k, &descales.v};
  const char* names[3] = {"q_descale", "k_descale", "v_descale"};
  argument.tensors.reserve(3);
  for (std::size_t i = 0; i < 3; ++i) {
    const py::handle item = triple[i];
    if (item.is_none()) continue;
    if (py::isinstance<py::float_>(item) || py::isinstance<py::int_>(item)) {
      *slots[i] = Descale(item.cast<float>());
      continue;
    }
    argument.tensors.push_back(borrow_tensor(item, names[i], queue, stream));
    *slots[i] = Descale::of(argument.tensors.back().view);
  }
  argument.descales = descales;
  return argument;
}

// docs/contract.md §12: a top-k mask (None, or int32 [B, rows, words]), a
// window (0: none) and sinks (None, or float32 [H]), kept alive for the call.
struct MaskArguments {
  std::optional<BorrowedMask> topk;
  std::optional<BorrowedTensor> sinks;
  AttentionMask mask;
};

MaskArguments mask_of(py::handle topk_mask, std::int64_t window, py::handle sinks, const Queue& queue,
                      py::handle stream) {
  MaskArguments argument;
  if (!topk_mask.is_none()) {
    argument.topk = borrow_topk_mask(topk_mask, "topk_mask", queue, stream);
    argument.mask.topk = argument.topk->mask;
  }
  argument.mask.window = window;
  argument.sinks = borrow_optional(sinks, "sinks", queue, stream);
  if (argument.sinks) argument.mask.sinks = argument.sinks->view;
  return argument;
}

std::optional<TensorView> view_of(const std::optional<BorrowedTensor>& tensor) {
  if (!tensor) return std::nullopt;
  return tensor->view;
}

void prepare(BackendObject& self, const CuList& cu_q, const std::optional<CuList>& cu_k,
             const std::vector<CuList>& chunks, std::optional<int> max_q, std::optional<int> max_k, bool causal,
             py::handle stream) {
  const PrefillMetadata metadata = metadata_of(cu_q, cu_k, chunks, max_q, max_k, causal);
  Queue queue = self.queue_for(stream);
  py::gil_scoped_release unlocked;
  std::lock_guard lock(self.mutex());
  self.backend().prepare(queue, metadata);
}

// The operands both attention calls borrow, in this order.
struct AttentionTensors {
  BorrowedTensor q, k, v, out;
};

AttentionTensors borrow_attention(py::handle q, py::handle k, py::handle v, py::handle out, const Queue& queue,
                                  py::handle stream) {
  return {borrow_tensor(q, "q", queue, stream), borrow_tensor(k, "k", queue, stream),
          borrow_tensor(v, "v", queue, stream), borrow_tensor(out, "out", queue, stream)};
}

void run_new_tokens(BackendObject& self, py::handle q, py::handle k, py::handle v, float softmax_scale, bool return_lse,
                    py::handle out, py::handle lse, py::handle output_scale, py::handle stream, py::handle descales,
                    py::handle topk_mask, std::int64_t window, py::handle sinks) {
  Queue queue = self.queue_for(stream);
  const AttentionTensors tensors = borrow_attention(q, k, v, out, queue, stream);
  const std::optional<BorrowedTensor> tlse = borrow_optional(lse, "lse", queue, stream);
  const ScaleArgument scale = scale_of(output_scale, queue, stream);
  const DescaleArguments input_descales = descales_of(descales, queue, stream);
  const MaskArguments masks = mask_of(topk_mask, window, sinks, queue, stream);
  py::gil_scoped_release unlocked;
  std::lock_guard lock(self.mutex());
  self.backend().run_new_tokens(queue, tensors.q.view, tensors.k.view, tensors.v.view, softmax_scale, return_lse,
                                tensors.out.view, scale.scale, view_of(tlse), input_descales.descales, masks.mask);
}

void run_context_chunk(BackendObject& self, int index, py::handle q, py::handle k, py::handle v, float softmax_scale,
                       py::handle out, py::handle lse, py::handle stream, py::handle descales, py::handle topk_mask,
                       std::int64_t window, py::handle sinks) {
  Queue queue = self.queue_for(stream);
  const AttentionTensors operands = borrow_attention(q, k, v, out, queue, stream);
  const BorrowedTensor tlse = borrow_tensor(lse, "lse", queue, stream);
  const DescaleArguments input_descales = descales_of(descales, queue, stream);
  const MaskArguments masks = mask_of(topk_mask, window, sinks, queue, stream);
  py::gil_scoped_release unlocked;
  std::lock_guard lock(self.mutex());
  self.backend().run_context_chunk(queue, index, operands.q.view, operands.k.view, operands.v.view, softmax_scale,
                                   operands.out.view, tlse.view, input_descales.descales, masks.mask);
}

void merge(BackendObject& self, py::handle prefix_out, py::handle prefix_lse, py::handle suffix_out,
           py::handle suffix_lse, py::handle out, py::handle out_lse, std::optional<std::int64_t> tokens_with_context,
           py::handle output_scale, py::handle stream, py::handle sinks) {
  Queue queue = self.queue_for(stream);
  const BorrowedTensor po = borrow_tensor(prefix_out, "prefix_output", queue, stream);
  const BorrowedTensor pl = borrow_tensor(prefix_lse, "prefix_lse", queue, stream);
  const BorrowedTensor so = borrow_tensor(suffix_out, "suffix_output", queue, stream);
  const BorrowedTensor sl = borrow_tensor(suffix_lse, "suffix_lse", queue, stream);
  const BorrowedTensor to = borrow_tensor(out, "output", queue, stream);
  const std::optional<BorrowedTensor> tl = borrow_optional(out_lse, "output_lse", queue, stream);
  const ScaleArgument scale = scale_of(output_scale, queue, stream);
  const std::optional<BorrowedTensor> tsinks = borrow_optional(sinks, "sinks", queue, stream);
  MergeArgs args;
  if (tsinks) args.sinks = tsinks->view;
  args.prefix_out = po.view;
  args.prefix_lse = pl.view;
  args.suffix_out = so.view;
  args.suffix_lse = sl.view;
  args.out = to.view;
  if (tl) args.out_lse = tl->view;
  args.prefill_tokens_with_context = tokens_with_context;
  args.out_scale = scale.scale;
  py::gil_scoped_release unlocked;
  std::lock_guard lock(self.mutex());
  self.backend().merge_attn_states(queue, args);
}

std::vector<BorrowedTensor> borrow_list(const py::list& objects, const char* what, const Queue& queue,
                                        py::handle stream) {
  std::vector<BorrowedTensor> tensors;
  for (std::size_t i = 0; i < objects.size(); ++i) {
    const std::string name = std::string(what) + "[" + std::to_string(i) + "]";
    tensors.push_back(borrow_tensor(objects[i], name.c_str(), queue, stream));
  }
  return tensors;
}

std::size_t workspace_size(const BackendObject& self, const CuList& cu_q, const std::optional<CuList>& cu_k,
                           const std::vector<CuList>& chunks) {
  const PrefillMetadata metadata = metadata_of(cu_q, cu_k, chunks, std::nullopt, std::nullopt, true);
  return prefill_step_workspace_size(self.backend().params(), metadata);
}

void run_prefill_step(BackendObject& self, py::handle q, py::handle k, py::handle v, const CuList& cu_q,
                      const std::optional<CuList>& cu_k, const std::vector<CuList>& chunk_cu, const py::list& chunk_k,
                      const py::list& chunk_v, float softmax_scale, py::handle out, py::handle lse,
                      py::handle workspace, bool causal, py::handle stream, py::handle descales, py::handle topk_mask,
                      std::int64_t window, py::handle sinks) {
  const PrefillMetadata metadata = metadata_of(cu_q, cu_k, chunk_cu, std::nullopt, std::nullopt, causal);
  Queue queue = self.queue_for(stream);
  const BorrowedTensor tq = borrow_tensor(q, "q", queue, stream);
  const BorrowedTensor tk = borrow_tensor(k, "k", queue, stream);
  const BorrowedTensor tv = borrow_tensor(v, "v", queue, stream);
  const std::vector<BorrowedTensor> ck = borrow_list(chunk_k, "chunk_k", queue, stream);
  const std::vector<BorrowedTensor> cv = borrow_list(chunk_v, "chunk_v", queue, stream);
  const BorrowedTensor tout = borrow_tensor(out, "out", queue, stream);
  const std::optional<BorrowedTensor> tlse = borrow_optional(lse, "lse", queue, stream);
  const std::optional<BorrowedTensor> tws = borrow_optional(workspace, "workspace", queue, stream);
  const DescaleArguments input_descales = descales_of(descales, queue, stream);
  const MaskArguments masks = mask_of(topk_mask, window, sinks, queue, stream);
  std::vector<TensorView> k_views, v_views;
  for (const BorrowedTensor& t : ck) k_views.push_back(t.view);
  for (const BorrowedTensor& t : cv) v_views.push_back(t.view);
  PrefillStepBuffers buffers;
  buffers.out = tout.view;
  if (tlse) buffers.lse = tlse->view;
  if (tws) {
    if (!tws->view.is_contiguous()) raise(ErrorCategory::invalid_argument, "workspace must be contiguous");
    buffers.workspace = tws->view.data;
    buffers.workspace_bytes = static_cast<std::size_t>(tws->view.numel()) * dtype_size(tws->view.dtype);
  }
  py::gil_scoped_release unlocked;
  std::lock_guard lock(self.mutex());
  mla::run_prefill_step(self.backend(), queue, metadata, tq.view, tk.view, tv.view, k_views, v_views, softmax_scale,
                        buffers, input_descales.descales, masks.mask);
}

// A step's plan from Python lists: vLLM's chunks for `workspace_tokens`, or
// chunks filled to it with `packed`.
MlaStepPlan plan_mla_step(const BackendObject& self, const CuList& cu_q, const CuList& context_lens,
                          const CuList& block_table, int max_blocks, int block_size, std::int64_t workspace_tokens,
                          bool packed) {
  MlaStepMetadata metadata;
  metadata.cu_seqlens_q = cu_seqlens_of(cu_q, "cu_seqlens_q");
  metadata.context_lens = cu_seqlens_of(context_lens, "context_lens");
  metadata.block_table = cu_seqlens_of(block_table, "block_table");
  metadata.max_blocks = max_blocks;
  const BackendParams& params = self.backend().params();
  if (packed) {
    return plan_mla_prefill(params, metadata, block_size, pack_context_chunks(metadata.context_lens, workspace_tokens));
  }
  return plan_mla_prefill(params, metadata, block_size, workspace_tokens);
}

void run_mla_step(BackendObject& self, const MlaStepPlan& plan, py::handle q, py::handle kv_c, py::handle k_pe,
                  py::handle cache, float cache_scale, py::handle kv_b_proj, float softmax_scale, py::handle out,
                  py::handle lse, py::handle workspace, py::handle stream) {
  Queue queue = self.queue_for(stream);
  const BorrowedTensor tq = borrow_tensor(q, "q", queue, stream);
  const BorrowedTensor tkv = borrow_tensor(kv_c, "kv_c", queue, stream);
  const BorrowedTensor tpe = borrow_tensor(k_pe, "k_pe", queue, stream);
  const BorrowedTensor tcache = borrow_tensor(cache, "cache", queue, stream);
  const BorrowedTensor tw = borrow_tensor(kv_b_proj, "kv_b_proj", queue, stream);
  const BorrowedTensor tout = borrow_tensor(out, "out", queue, stream);
  const std::optional<BorrowedTensor> tlse = borrow_optional(lse, "lse", queue, stream);
  const std::optional<BorrowedTensor> tws = borrow_optional(workspace, "workspace", queue, stream);
  const MlaStepInputs inputs{tq.view, tkv.view, tpe.view, tcache.view, cache_scale, tw.view};
  const MlaStepOutputs outputs{tout.view, tlse ? tlse->view : TensorView{}};
  Workspace memory;
  if (tws) {
    if (!tws->view.is_contiguous()) raise(ErrorCategory::invalid_argument, "workspace must be contiguous");
    memory = {tws->view.data, static_cast<std::size_t>(tws->view.numel()) * dtype_size(tws->view.dtype)};
  }
  py::gil_scoped_release unlocked;
  std::lock_guard lock(self.mutex());
  run_mla_prefill(self.backend(), queue, plan, inputs, outputs, memory, softmax_scale);
}

py::list chunk_dicts(const ContextPlan& plan) {
  py::list chunks;
  for (std::size_t c = 0; c < plan.chunks.size(); ++c) {
    py::dict chunk;
    chunk["starts"] = plan.chunks[c].starts;
    chunk["cu_seqlens_k"] = plan.chunks[c].cu_seqlens_k;
    chunk["max_seqlen_k"] = plan.chunks[c].max_seqlen_k;
    chunk["chunk_size"] = plan.chunk_size[c];
    chunks.append(chunk);
  }
  return chunks;
}

QuantKey quant_key_of(const std::string& key) {
  if (key == "fp8_e4m3_static_per_tensor") return QuantKey::fp8_e4m3_static_per_tensor;
  raise(ErrorCategory::invalid_argument,
        "unknown output quantisation '" + key + "'; known: fp8_e4m3_static_per_tensor");
}

}  // namespace

void bind_backend(py::module_& m) {
  const py::none none;
  py::class_<BackendObject, std::shared_ptr<BackendObject>>(m, "Backend")
      .def_property_readonly("name", [](const BackendObject& b) { return b.backend().name(); })
      .def_property_readonly("num_heads", [](const BackendObject& b) { return b.backend().params().num_heads; })
      .def_property_readonly("kv_lora_rank", [](const BackendObject& b) { return b.backend().params().kv_lora_rank; })
      .def_property_readonly("dtype",
                             [](const BackendObject& b) { return std::string(dtype_name(b.backend().params().dtype)); })
      .def_property_readonly(
          "out_dtype",
          [](const BackendObject& b) { return std::string(dtype_name(b.backend().params().output_dtype())); })
      .def_property_readonly("dims",
                             [](const BackendObject& b) {
                               const MlaDims& d = b.backend().params().dims;
                               return std::make_tuple(d.qk_nope_head_dim, d.qk_rope_head_dim, d.v_head_dim);
                             })
      .def_property_readonly("kernel_info", [](const BackendObject& b) { return b.backend().kernel_info(); })
      .def_property_readonly("queue", [](const BackendObject& b) { return b.queue().describe(); })
      .def_property_readonly(
          "queue_kind", [](const BackendObject& b) { return std::string(device_backend_name(b.queue().backend())); })
      .def_property_readonly("device_index", [](const BackendObject& b) { return b.queue().device_index(); })
      .def("supports_quant_output",
           [](const BackendObject& b, const std::string& key) {
             return b.backend().supports_quant_output(quant_key_of(key));
           })
      .def("prepare", &prepare, py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("chunks"),
           py::arg("max_seqlen_q"), py::arg("max_seqlen_k"), py::arg("causal"), py::arg("stream") = none)
      .def("run_new_tokens", &run_new_tokens, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale"),
           py::arg("return_lse"), py::arg("out"), py::arg("lse"), py::arg("output_scale"), py::arg("stream") = none,
           py::arg("descales") = none, py::arg("topk_mask") = none, py::arg("window") = 0, py::arg("sinks") = none)
      .def("run_context_chunk", &run_context_chunk, py::arg("index"), py::arg("q"), py::arg("k"), py::arg("v"),
           py::arg("scale"), py::arg("out"), py::arg("lse"), py::arg("stream") = none, py::arg("descales") = none,
           py::arg("topk_mask") = none, py::arg("window") = 0, py::arg("sinks") = none)
      .def("merge_attn_states", &merge, py::arg("prefix_output"), py::arg("prefix_lse"), py::arg("suffix_output"),
           py::arg("suffix_lse"), py::arg("output"), py::arg("output_lse"), py::arg("prefill_tokens_with_context"),
           py::arg("output_scale"), py::arg("stream") = none, py::arg("sinks") = none)
      .def("workspace_size", &workspace_size, py::arg("cu_seqlens_q"), py::arg("cu_seqlens_k"), py::arg("chunks"))
      .def("run_prefill_step", &run_prefill_step, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("cu_seqlens_q"),
           py::arg("cu_seqlens_k"), py::arg("chunk_cu_seqlens"), py::arg("chunk_k"), py::arg("chunk_v"),
           py::arg("scale"), py::arg("out"), py::arg("lse"), py::arg("workspace"), py::arg("causal"),
           py::arg("stream") = none, py::arg("descales") = none, py::arg("topk_mask") = none, py::arg("window") = 0,
           py::arg("sinks") = none)
      .def("plan_mla_prefill", &plan_mla_step, py::arg("cu_seqlens_q"), py::arg("context_lens"), py::arg("block_table"),
           py::arg("max_blocks"), py::arg("block_size"), py::arg("workspace_tokens"), py::arg("packed"))
      .def("run_mla_prefill", &run_mla_step, py::arg("plan"), py::arg("q"), py::arg("kv_c"), py::arg("k_pe"),
           py::arg("cache"), py::arg("cache_scale"), py::arg("kv_b_proj"), py::arg("scale"), py::arg("out"),
           py::arg("lse"), py::arg("workspace"), py::arg("stream") = none);
  py::class_<MlaStepPlan>(m, "MlaStepPlan")
      .def_readonly("workspace_bytes", &MlaStepPlan::workspace_bytes)
      .def_readonly("num_heads", &MlaStepPlan::num_heads)
      .def_readonly("kv_lora_rank", &MlaStepPlan::kv_lora_rank)
      .def_readonly("block_size", &MlaStepPlan::block_size)
      .def_readonly("batch_size", &MlaStepPlan::batch_size)
      .def_readonly("num_q_tokens", &MlaStepPlan::num_q_tokens)
      .def_readonly("slots", &MlaStepPlan::slots)
      .def_readonly("slot_offsets", &MlaStepPlan::slot_offsets)
      .def_property_readonly("dtype", [](const MlaStepPlan& plan) { return std::string(dtype_name(plan.dtype)); })
      .def_property_readonly("dims",
                             [](const MlaStepPlan& plan) {
                               return std::make_tuple(plan.dims.qk_nope_head_dim, plan.dims.qk_rope_head_dim,
                                                      plan.dims.v_head_dim);
                             })
      .def_property_readonly("chunks", [](const MlaStepPlan& plan) { return chunk_dicts(plan.context); });
  m.def(
      "plan_context_chunks",
      [](const std::vector<std::int32_t>& context_lens, std::int64_t workspace_tokens, int block_size) {
        return chunk_dicts(plan_context_chunks(context_lens, workspace_tokens, block_size));
      },
      py::arg("context_lens"), py::arg("workspace_tokens"), py::arg("block_size"));
}

}  // namespace mla::python
