#include "mla_step_check.hpp"

#include <cmath>
#include <string>

#include "mla/error.hpp"
#include "overlap.hpp"

namespace mla::detail {
namespace {

[[noreturn]] void bad(const std::string& message) {
  raise(ErrorCategory::invalid_argument, "run_mla_prefill: " + message);
}

void check_view(const TensorView& view, const char* what, int rank) {
  if (view.empty_view() || view.rank != rank) {
    bad(std::string(what) + " must be a " + std::to_string(rank) + "-d tensor, got " +
        (view.empty_view() ? std::string("none") : view.describe()));
  }
  for (int d = 0; d < rank; ++d) {
    if (view.stride[static_cast<std::size_t>(d)] < 0) bad(std::string(what) + " has a negative stride");
  }
}

void check_dims(const TensorView& view, const char* what, std::initializer_list<std::int64_t> shape) {
  int d = 0;
  for (std::int64_t expected : shape) {
    if (expected >= 0 && view.size(d) != expected) {
      bad(std::string(what) + " dimension " + std::to_string(d) + " is " + std::to_string(view.size(d)) +
          ", expected " + std::to_string(expected) + " (" + view.describe() + ")");
    }
    ++d;
  }
}

void check_dtype(const TensorView& view, const char* what, DType dtype) {
  if (view.dtype != dtype) {
    bad(std::string(what) + " must be " + std::string(dtype_name(dtype)) + " like the backend, got " + view.describe());
  }
}

void check_blocks(const MlaStepMetadata& metadata, const MlaStepShape& shape) {
  const std::size_t batch = metadata.context_lens.size();
  if (metadata.max_blocks < 0 || metadata.block_table.size() != batch * static_cast<std::size_t>(metadata.max_blocks)) {
    bad("block_table has " + std::to_string(metadata.block_table.size()) + " entries, expected " +
        std::to_string(batch) + " sequences x " + std::to_string(metadata.max_blocks) + " max_blocks");
  }
  for (std::size_t b = 0; b < batch; ++b) {
    const std::int64_t context = metadata.context_lens[b];
    if (context < 0) bad("context_lens[" + std::to_string(b) + "] = " + std::to_string(context) + " is negative");
    const std::int64_t blocks = (context + shape.block_size - 1) / shape.block_size;
    if (blocks > metadata.max_blocks) {
      bad("sequence " + std::to_string(b) + " has " + std::to_string(context) + " context tokens but its row of " +
          "block_table holds " + std::to_string(metadata.max_blocks) + " blocks of " +
          std::to_string(shape.block_size));
    }
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int32_t block =
          metadata.block_table[b * static_cast<std::size_t>(metadata.max_blocks) + static_cast<std::size_t>(j)];
      if (block < 0 || block >= shape.num_blocks) {
        bad("block_table[" + std::to_string(b) + "][" + std::to_string(j) + "] = " + std::to_string(block) +
            " is not a block of the cache (0.." + std::to_string(shape.num_blocks - 1) + ")");
      }
    }
  }
}

}  // namespace

MlaStepShape check_mla_step(const BackendParams& params, const MlaStepMetadata& metadata, const MlaStepInputs& inputs,
                            const MlaStepOutputs& outputs) {
  MlaStepShape shape;
  shape.heads = params.num_heads;
  shape.p = params.dims.qk_nope_head_dim;
  shape.r = params.dims.qk_rope_head_dim;
  shape.v = params.dims.v_head_dim;
  check_cu_seqlens(metadata.cu_seqlens_q, "cu_seqlens_q");
  if (metadata.context_lens.size() + 1 != metadata.cu_seqlens_q.size()) {
    bad("context_lens has " + std::to_string(metadata.context_lens.size()) + " entries but cu_seqlens_q describes " +
        std::to_string(metadata.cu_seqlens_q.size() - 1) + " sequences");
  }
  shape.num_q = metadata.cu_seqlens_q.back();

  check_view(inputs.kv_b_proj, "kv_b_proj", 2);
  shape.latent = static_cast<int>(inputs.kv_b_proj.size(1));
  check_dims(inputs.kv_b_proj, "kv_b_proj", {std::int64_t{shape.heads} * (shape.p + shape.v), -1});
  check_view(inputs.q, "q", 3);
  check_dims(inputs.q, "q", {shape.num_q, shape.heads, shape.p + shape.r});
  check_dtype(inputs.q, "q", params.dtype);
  check_view(inputs.kv_c, "kv_c", 2);
  check_dims(inputs.kv_c, "kv_c", {shape.num_q, shape.latent});
  check_dtype(inputs.kv_c, "kv_c", params.dtype);
  check_view(inputs.k_pe, "k_pe", 2);
  check_dims(inputs.k_pe, "k_pe", {shape.num_q, shape.r});
  check_dtype(inputs.k_pe, "k_pe", params.dtype);
  check_view(inputs.cache, "cache", 3);
  check_dims(inputs.cache, "cache", {-1, -1, std::int64_t{shape.latent} + shape.r});
  if (inputs.cache.dtype != params.dtype && inputs.cache.dtype != DType::float8_e4m3) {
    bad("cache must be " + std::string(dtype_name(params.dtype)) + " or float8_e4m3 bytes, got " +
        inputs.cache.describe());
  }
  if (inputs.cache.dtype == DType::float8_e4m3 && !(std::isfinite(inputs.cache_scale) && inputs.cache_scale > 0)) {
    bad("an fp8 cache needs a finite positive cache_scale, got " + std::to_string(inputs.cache_scale));
  }
  shape.num_blocks = inputs.cache.size(0);
  shape.block_size = static_cast<int>(inputs.cache.size(1));
  if (shape.block_size < 1) bad("cache blocks hold no tokens (" + inputs.cache.describe() + ")");
  check_blocks(metadata, shape);

  check_view(outputs.out, "out", 3);
  check_dims(outputs.out, "out", {shape.num_q, shape.heads, shape.v});
  check_dtype(outputs.out, "out", params.dtype);
  if (!outputs.lse.empty_view()) {
    check_view(outputs.lse, "lse", 2);
    check_dims(outputs.lse, "lse", {shape.heads, shape.num_q});
    check_dtype(outputs.lse, "lse", DType::float32);
  }
  check_no_overlap(inputs, outputs);
  return shape;
}

}  // namespace mla::detail
