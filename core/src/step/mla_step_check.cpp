#include "step/mla_step_check.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

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
  check_has_data(view, ("run_mla_prefill: " + std::string(what)).c_str());
}

// One expected extent and where the plan has it from, e.g. {64, "kv_lora_rank"}.
struct Extent {
  std::int64_t value;  // -1: any
  const char* source;
};

void check_dims(const TensorView& view, const char* what, std::initializer_list<Extent> shape) {
  int d = 0;
  for (const Extent& expected : shape) {
    if (expected.value >= 0 && view.size(d) != expected.value) {
      bad(std::string(what) + " dimension " + std::to_string(d) + " is " + std::to_string(view.size(d)) +
          ", but the plan's " + expected.source + " is " + std::to_string(expected.value) + " (" + view.describe() +
          ")");
    }
    ++d;
  }
}

void check_dtype(const TensorView& view, const char* what, DType dtype) {
  if (view.dtype != dtype) {
    bad(std::string(what) + " must be " + std::string(dtype_name(dtype)) + " like the plan, got " + view.describe());
  }
}

void check_backend(const MlaStepPlan& plan, const BackendParams& backend) {
  const auto differs = [](const std::string& what, const std::string& backend_value, const std::string& plan_value) {
    bad("the backend was built for " + what + " " + backend_value + " but the plan for " + plan_value);
  };
  if (backend.num_heads != plan.num_heads) {
    differs("num_heads", std::to_string(backend.num_heads), std::to_string(plan.num_heads));
  }
  if (backend.dims != plan.dims) differs("dims", to_string(backend.dims), to_string(plan.dims));
  if (backend.dtype != plan.attention_dtype) {
    differs("dtype", std::string(dtype_name(backend.dtype)), std::string(dtype_name(plan.attention_dtype)));
  }
  if (backend.output_dtype() != plan.dtype) {
    differs("output dtype", std::string(dtype_name(backend.output_dtype())), std::string(dtype_name(plan.dtype)));
  }
  if (backend.kv_lora_rank != plan.kv_lora_rank) {
    differs("kv_lora_rank", std::to_string(backend.kv_lora_rank), std::to_string(plan.kv_lora_rank));
  }
}

}  // namespace

BlockTableEntry check_step_metadata(const MlaStepMetadata& metadata, int block_size) {
  // Called when the step is planned: the messages name that call.
  const auto bad = [](const std::string& message) {
    raise(ErrorCategory::invalid_argument, "plan_mla_prefill: " + message);
  };
  if (block_size < 1) bad("block_size must be at least 1, got " + std::to_string(block_size));
  check_cu_seqlens(metadata.cu_seqlens_q, "cu_seqlens_q");
  const std::size_t batch = metadata.context_lens.size();
  if (batch + 1 != metadata.cu_seqlens_q.size()) {
    bad("context_lens has " + std::to_string(batch) + " entries but cu_seqlens_q describes " +
        std::to_string(metadata.cu_seqlens_q.size() - 1) + " sequences");
  }
  if (metadata.max_blocks < 0 || metadata.block_table.size() != batch * static_cast<std::size_t>(metadata.max_blocks)) {
    bad("block_table has " + std::to_string(metadata.block_table.size()) + " entries, expected " +
        std::to_string(batch) + " sequences x " + std::to_string(metadata.max_blocks) + " max_blocks");
  }
  BlockTableEntry largest;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::int64_t context = metadata.context_lens[b];
    if (context < 0) bad("context_lens[" + std::to_string(b) + "] = " + std::to_string(context) + " is negative");
    const std::int64_t blocks = (context + block_size - 1) / block_size;
    if (blocks > metadata.max_blocks) {
      bad("sequence " + std::to_string(b) + " has " + std::to_string(context) + " context tokens but its row of " +
          "block_table holds " + std::to_string(metadata.max_blocks) + " blocks of " + std::to_string(block_size));
    }
    for (std::int64_t j = 0; j < blocks; ++j) {
      const std::int32_t block =
          metadata.block_table[b * static_cast<std::size_t>(metadata.max_blocks) + static_cast<std::size_t>(j)];
      if (block < 0) {
        bad("block_table[" + std::to_string(b) + "][" + std::to_string(j) + "] = " + std::to_string(block) +
            " is not a block of the cache");
      }
      if (block > largest.block) largest = {static_cast<int>(b), static_cast<int>(j), block};
    }
  }
  return largest;
}

void check_mla_step(const MlaStepPlan& plan, const BackendParams& backend, const MlaStepInputs& inputs,
                    const MlaStepOutputs& outputs, const std::optional<OutputScale>& out_scale) {
  check_backend(plan, backend);
  const std::int64_t nq = plan.num_q_tokens, heads = plan.num_heads, latent = plan.kv_lora_rank;
  const std::int64_t p = plan.dims.qk_nope_head_dim, r = plan.dims.qk_rope_head_dim, v = plan.dims.v_head_dim;
  check_view(inputs.kv_b_proj, "kv_b_proj", 2);
  check_dims(inputs.kv_b_proj, "kv_b_proj",
             {{heads * (p + v), "num_heads x (qk_nope_head_dim + v_head_dim)"}, {latent, "kv_lora_rank"}});
  check_view(inputs.q, "q", 3);
  check_dims(inputs.q, "q", {{nq, "token count"}, {heads, "num_heads"}, {p + r, "qk_head_dim"}});
  check_dtype(inputs.q, "q", plan.attention_dtype);
  const bool fp8 = plan.attention_dtype == DType::float8_e4m3;
  const bool fp8_arguments = inputs.q_descale.is_tensor() || inputs.q_descale.value != 1.0f || inputs.k_scale ||
                             inputs.v_scale || outputs.kv_scales != nullptr;
  if (!fp8 && fp8_arguments) {
    bad("q_descale, k_scale, v_scale and kv_scales are for the FP8 attention mode; the plan's attention dtype is " +
        std::string(dtype_name(plan.attention_dtype)));
  }
  for (const auto& [scale, name] : {std::pair{inputs.k_scale, "k_scale"}, std::pair{inputs.v_scale, "v_scale"}}) {
    if (scale && !(std::isfinite(*scale) && *scale > 0.0f))
      bad(std::string(name) + " must be a finite positive number, got " + std::to_string(*scale));
  }
  check_view(inputs.kv_c, "kv_c", 2);
  check_dims(inputs.kv_c, "kv_c", {{nq, "token count"}, {latent, "kv_lora_rank"}});
  check_dtype(inputs.kv_c, "kv_c", plan.dtype);
  check_view(inputs.k_pe, "k_pe", 2);
  check_dims(inputs.k_pe, "k_pe", {{nq, "token count"}, {r, "qk_rope_head_dim"}});
  check_dtype(inputs.k_pe, "k_pe", plan.dtype);
  check_view(inputs.cache, "cache", 3);
  if (inputs.cache_format != CacheFormat::plain) {
    // A grouped cache (docs/contract.md §13): byte records of the format.
    const std::string name(cache_format_name(inputs.cache_format));
    if (const std::string refusal = cache_format_refusal(inputs.cache_format, latent, r); !refusal.empty())
      bad("cache_format " + refusal + " (kv_lora_rank and qk_rope_head_dim)");
    check_dims(inputs.cache, "cache",
               {{-1, ""}, {plan.block_size, "block_size"}, {cache_record_bytes(inputs.cache_format), name.c_str()}});
    if (inputs.cache.dtype != DType::float8_e4m3 || inputs.cache.stride[2] != 1)
      bad("a " + name + " cache is float8_e4m3 bytes with unit last stride, got " + inputs.cache.describe());
    if (inputs.cache_scale != 1.0f)
      bad("a " + name + " cache carries its own scales; cache_scale must be 1, got " +
          std::to_string(inputs.cache_scale));
  } else {
    check_dims(inputs.cache, "cache",
               {{-1, ""}, {plan.block_size, "block_size"}, {latent + r, "kv_lora_rank + qk_rope_head_dim"}});
  }
  if (inputs.cache.dtype != plan.dtype && inputs.cache.dtype != DType::float8_e4m3) {
    bad("cache must be " + std::string(dtype_name(plan.dtype)) + " or float8_e4m3 bytes, got " +
        inputs.cache.describe());
  }
  if (inputs.cache.dtype == DType::float8_e4m3 && !(std::isfinite(inputs.cache_scale) && inputs.cache_scale > 0)) {
    bad("an fp8 cache needs a finite positive cache_scale, got " + std::to_string(inputs.cache_scale));
  }
  const BlockTableEntry& largest = plan.largest_block;
  if (largest.block >= inputs.cache.size(0)) {
    bad("block_table[" + std::to_string(largest.sequence) + "][" + std::to_string(largest.column) +
        "] = " + std::to_string(largest.block) + " is not a block of the cache (0.." +
        std::to_string(inputs.cache.size(0) - 1) + ")");
  }

  check_view(outputs.out, "out", 3);
  check_dims(outputs.out, "out", {{nq, "token count"}, {heads, "num_heads"}, {v, "v_head_dim"}});
  if (out_scale) {
    if (outputs.out.dtype != DType::float8_e4m3)
      bad("out_scale is given, so out must be float8_e4m3, got " + outputs.out.describe());
  } else {
    check_dtype(outputs.out, "out", plan.dtype);
  }
  if (!outputs.lse.empty_view()) {
    check_view(outputs.lse, "lse", 2);
    check_dims(outputs.lse, "lse", {{heads, "num_heads"}, {nq, "token count"}});
    check_dtype(outputs.lse, "lse", DType::float32);
  }
}

}  // namespace mla::detail
