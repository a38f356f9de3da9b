// The CUDA_FLASH kernel, compiled by the host compiler against the emulated
// sm_80 primitives, and its launches: every row of the tile table, bf16 and
// fp16, causal and not, as the real dispatcher has them.
#include "simt/cuda_flash_emulated.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "cuda/flash_kernel.cuh"
#include "cuda/flash_launch_recipe.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash {
// The kernel's `extern __shared__` array: under emulation an anchor whose
// address stands for the first byte of the running block's dynamic shared memory.
alignas(128) unsigned char shared[16];
}  // namespace mla::cuda_flash

namespace mla::simt {
namespace {

using gpu::FlashParams;

// A small L2, so that the tests' few heads and short sequences still get
// groups of fewer than all heads (a head's K and V of 200 keys at 192/128
// fill 128 KiB) and the grouped block order runs.
constexpr std::size_t emulated_l2_bytes = 256 * 1024;

template <class T, int HeadDimQk, int HeadDimV, bool Causal, class In>
void run(const FlashParams& params) {
  const cuda_flash::FlashLaunch recipe = cuda_flash::plan_flash_launch<HeadDimQk, HeadDimV, Causal>(
      params, cuda_flash::element_dtype<T>, cuda_flash::element_dtype<In>);
  if (recipe.blocks == 0) return;
  LaunchConfig config;
  config.kernel = recipe.kernel;
  config.grid.x = static_cast<unsigned>(recipe.blocks);
  config.block.x = static_cast<unsigned>(recipe.threads);
  config.warp_size = cuda_flash::warp_threads;
  config.dynamic_shared_bytes = recipe.shared_bytes;
  config.dynamic_shared_symbol = cuda_flash::shared;
  config.dynamic_shared_alignment = 128;  // the kernel's __align__(128)
  config.global_reads = flash_input_ranges(params, HeadDimQk, HeadDimV);
  gpu::FlashParams grouped = params;
  grouped.head_group = cuda_flash::flash_head_group(params, emulated_l2_bytes, HeadDimQk, HeadDimV);
  launch(config, [&grouped] { cuda_flash::flash_forward_kernel<T, HeadDimQk, HeadDimV, Causal, In>(grouped); });
}

template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void run_inputs(const FlashParams& params) {
  if (params.e4m3_inputs) return run<T, HeadDimQk, HeadDimV, Causal, __nv_fp8_e4m3>(params);
  run<T, HeadDimQk, HeadDimV, Causal, T>(params);
}

template <class T, std::size_t... Row>
void dispatch(const FlashParams& params, int head_dim_qk, int head_dim_v, std::index_sequence<Row...>) {
  constexpr auto& rows = cuda_flash::flash_tile_configs;
  const bool launched = ((rows[Row].head_dim_qk == head_dim_qk && rows[Row].head_dim_v == head_dim_v &&
                          (params.causal ? run_inputs<T, rows[Row].head_dim_qk, rows[Row].head_dim_v, true>(params)
                                         : run_inputs<T, rows[Row].head_dim_qk, rows[Row].head_dim_v, false>(params),
                           true)) ||
                         ...);
  if (!launched) {
    raise(ErrorCategory::not_supported, "emulated CUDA_FLASH has no kernel for qk head dim " +
                                            std::to_string(head_dim_qk) + " and v head dim " +
                                            std::to_string(head_dim_v));
  }
}

}  // namespace

std::vector<MemoryRange> flash_input_ranges(const FlashParams& params, int head_dim_qk, int head_dim_v) {
  std::int32_t end_q = 0, end_k = 0;
  for (std::int32_t i = 0; i < params.num_work; ++i) {
    const std::int32_t seq = gpu::work_item(params.work, params.tiles_per_seq, i).seq;
    end_q = std::max(end_q, params.cu_seqlens_q[seq + 1]);
    end_k = std::max(end_k, params.cu_seqlens_k[seq + 1]);
  }
  const auto span = [&](const void* base, std::int64_t rows, std::int64_t row_stride, std::int64_t head_stride, int dim,
                        const char* what) {
    const std::int64_t elements = rows == 0 ? 0 : (rows - 1) * row_stride + (params.num_heads - 1) * head_stride + dim;
    return MemoryRange{base, static_cast<std::size_t>(elements) * (params.e4m3_inputs ? 1 : 2), what};
  };
  return {span(params.q, end_q, params.q_row_stride, params.q_head_stride, head_dim_qk, "q"),
          span(params.k, end_k, params.k_row_stride, params.k_head_stride, head_dim_qk, "k"),
          span(params.v, end_k, params.v_row_stride, params.v_head_stride, head_dim_v, "v")};
}

void launch_cuda_flash_emulated(const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v) {
  constexpr auto rows = std::make_index_sequence<std::size(cuda_flash::flash_tile_configs)>{};
  if (dtype == DType::bfloat16) {
    dispatch<__nv_bfloat16>(params, head_dim_qk, head_dim_v, rows);
  } else if (dtype == DType::float16) {
    dispatch<__half>(params, head_dim_qk, head_dim_v, rows);
  } else {
    raise(ErrorCategory::not_supported,
          "emulated CUDA_FLASH runs float16 and bfloat16; got " + std::string(dtype_name(dtype)));
  }
}

}  // namespace mla::simt
