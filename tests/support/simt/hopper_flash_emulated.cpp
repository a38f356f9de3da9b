// The HOPPER_FLASH kernel, compiled by the host compiler against the emulated
// sm_90a primitives, and its launches: every row of its tile table, bf16,
// fp16 and e4m3 inputs (the last with the transpose of V first), causal and
// not, as the real dispatcher has them.
#include "simt/hopper_flash_emulated.hpp"

#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/hopper_config.hpp"
#include "cuda/hopper_kernel.cuh"
#include "cuda/hopper_launch.hpp"
#include "cuda_hip/flash_dims.hpp"
#include "cuda_hip/gpu_flash_backend.hpp"
#include "mla/error.hpp"
#include "simt/cuda_flash_emulated.hpp"
#include "simt/latents_emulated.hpp"
#include "simt/merge_emulated.hpp"
#include "simt/projection_emulated.hpp"

namespace mla::hopper_flash {
// The kernel's `extern __shared__` array: under emulation an anchor whose
// address stands for the running block's dynamic shared memory, as large as
// a Hopper block's so that the kernel's pointers into it stay in bounds.
alignas(16) unsigned char shared[simt::shared_anchor_bytes];
}  // namespace mla::hopper_flash

namespace mla::simt {
namespace {

using gpu::FlashParams;

// e4m3: the transposed copy of V (hopper_config.hpp) into `vt`, as the CUDA
// launch writes it.
template <int HeadDimV>
void transpose_v(const FlashParams& params, std::vector<unsigned char>& vt) {
  const hopper_flash::TransposeGrid grid = hopper_flash::transpose_grid(params, HeadDimV);
  vt.assign(hopper_flash::transposed_v_bytes(params, HeadDimV), 0xff);  // NaN bytes wherever it writes nothing
  LaunchConfig config;
  config.kernel = "transpose_v_e4m3<" + std::to_string(HeadDimV) + ">";
  config.grid.x = grid.blocks_x;
  config.grid.y = grid.heads;
  config.block.x = grid.threads;
  config.warp_size = 32;
  unsigned char* out = vt.data();
  launch(config, [&params, out, &grid] { hopper_flash::transpose_v_e4m3<HeadDimV>(params, out, grid.columns); });
}

template <class T, int HeadDimQk, int HeadDimV, bool Causal, class In, bool KeyMask>
void run(const FlashParams& params) {
  constexpr DType dtype = cuda_flash::element_dtype<T>;
  constexpr bool e4m3 = sizeof(In) == 1;
  std::vector<unsigned char> vt;
  if (e4m3 && params.num_work > 0 && params.num_heads > 0) transpose_v<HeadDimV>(params, vt);
  const hopper_flash::HopperLaunch recipe = hopper_flash::plan_hopper_launch<HeadDimQk, HeadDimV, Causal>(
      params, dtype, hopper_emulated_blocks, hopper_flash::default_max_head_group, e4m3 ? vt.data() : nullptr);
  if (recipe.grid.blocks == 0) return;
  LaunchConfig config;
  config.kernel = recipe.kernel;
  config.grid.x = static_cast<unsigned>(recipe.grid.blocks);
  config.block.x = static_cast<unsigned>(hopper_flash::block_threads);
  config.warp_size = 32;
  config.dynamic_shared_bytes = recipe.shared_bytes;
  config.dynamic_shared_symbol = hopper_flash::shared;
  // As declared in the kernel: 16 bytes, so every emulated launch runs the
  // kernel's own alignment of its tiles to 1024 bytes.
  config.dynamic_shared_alignment = 16;
  config.global_reads = flash_input_ranges(params, HeadDimQk, HeadDimV);
  if (e4m3) config.global_reads.push_back({vt.data(), vt.size(), "the transposed v"});
  // The tile counter, zeroed per launch as the CUDA launcher does.
  int tile_counter = 0;
  hopper_flash::HopperSchedule schedule = recipe.grid.schedule;
  schedule.tile_counter = &tile_counter;
  const hopper_flash::HopperMaps& maps = recipe.maps;
  launch(config, [&params, &schedule, &maps] {
    hopper_flash::hopper_flash_kernel<T, HeadDimQk, HeadDimV, Causal, In, KeyMask>(params, schedule, maps.q, maps.k,
                                                                                   maps.v, maps.o);
  });
  // The schedule's bookkeeping: a block takes its first tile by its index and
  // every later one from the counter, until a take lands past the end, so the
  // counter ends at the tiles taken from it plus one failed take per block:
  // exactly total_tiles. Anything else hands a tile out twice or skips one.
  if (tile_counter != schedule.total_tiles) {
    raise(ErrorCategory::internal, "GPU emulator: " + recipe.kernel + ": the tile counter ended at " +
                                       std::to_string(tile_counter) + ", not at the schedule's " +
                                       std::to_string(schedule.total_tiles) + " tiles");
  }
}

// As the CUDA dispatch: e4m3 inputs or not, with docs/contract.md §12's key
// mask or not.
template <class T, int HeadDimQk, int HeadDimV, bool Causal, bool KeyMask>
void run_masked_or_not(const FlashParams& params) {
  if (params.e4m3_inputs) return run<T, HeadDimQk, HeadDimV, Causal, __nv_fp8_e4m3, KeyMask>(params);
  run<T, HeadDimQk, HeadDimV, Causal, T, KeyMask>(params);
}

template <class T, int HeadDimQk, int HeadDimV, bool Causal>
void run_inputs(const FlashParams& params) {
  if (params.mask.masks_keys()) return run_masked_or_not<T, HeadDimQk, HeadDimV, Causal, true>(params);
  run_masked_or_not<T, HeadDimQk, HeadDimV, Causal, false>(params);
}

template <class T, std::size_t... Row>
void dispatch(const FlashParams& params, int head_dim_qk, int head_dim_v, std::index_sequence<Row...>) {
  constexpr auto& rows = hopper_flash::hopper_tile_configs;
  const bool launched = ((rows[Row].head_dim_qk == head_dim_qk && rows[Row].head_dim_v == head_dim_v &&
                          (params.causal ? run_inputs<T, rows[Row].head_dim_qk, rows[Row].head_dim_v, true>(params)
                                         : run_inputs<T, rows[Row].head_dim_qk, rows[Row].head_dim_v, false>(params),
                           true)) ||
                         ...);
  if (!launched) {
    raise(ErrorCategory::not_supported, "emulated HOPPER_FLASH has no kernel for qk head dim " +
                                            std::to_string(head_dim_qk) + " and v head dim " +
                                            std::to_string(head_dim_v));
  }
}

// The real chooser, asked about the kernel alone: the emulated device is the
// host, whose queue and memory the kernel runs on.
gpu::KernelChoice hopper_choice(const gpu::KernelRequest& request) {
  return hopper_flash::choose_kernel({request.dtype, request.dims, nullptr});
}

void hopper_launch(Queue&, const FlashParams& params, DType dtype, const gpu::KernelTile& kernel) {
  launch_hopper_flash_emulated(params, dtype, kernel.head_dim_qk, kernel.head_dim_v);
  if (params.num_splits > 1) merge_splits_emulated(params, dtype, kernel.head_dim_v);
}

void merge(Queue&, const MergeArgs& args) { merge_attn_states_emulated(args); }

void gather(Queue&, const LatentGather& gather, const TensorView& latents, const TensorView& k) {
  gather_latents_emulated(gather, latents, k);
}

// CUDA_FLASH's up-projection (tensor cores), as the real HOPPER_FLASH uses.
void project(Queue&, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k, const TensorView& v) {
  project_latents_mma_emulated(latents, kv_b_proj, k, v);
}

// The emulated device is the host: its queue is the host queue, its memory host memory.
constexpr gpu::FlashVendor hopper_vendor{
    "HOPPER_FLASH (emulated)",
    DeviceBackend::host,
    hopper_choice,
    hopper_launch,
    merge,
    gather,
    project,
    nullptr,
    true,
    quantise_e4m3_emulated,
    true,
};

}  // namespace

void launch_hopper_flash_emulated(const FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v) {
  constexpr auto rows = std::make_index_sequence<std::size(hopper_flash::hopper_tile_configs)>{};
  if (dtype == DType::bfloat16) {
    dispatch<__nv_bfloat16>(params, head_dim_qk, head_dim_v, rows);
  } else if (dtype == DType::float16) {
    dispatch<__half>(params, head_dim_qk, head_dim_v, rows);
  } else {
    raise(ErrorCategory::not_supported,
          "emulated HOPPER_FLASH runs float16 and bfloat16; got " + std::string(dtype_name(dtype)));
  }
}

BackendEntry emulated_hopper_flash_entry() {
  BackendDescription description;
  description.name = hopper_vendor.backend_name;
  description.dtypes.assign(std::begin(gpu::flash_e4m3_dtypes), std::end(gpu::flash_e4m3_dtypes));
  description.dims.assign(std::begin(gpu::flash_dims), std::end(gpu::flash_dims));
  description.fp8_output = true;
  description.queue_kinds = {hopper_vendor.queue_backend};
  description.availability = [] { return Availability{}; };
  description.kernel_refusal = [](const SelectorConfig& request, const DeviceCapability& device) {
    return hopper_vendor.choose({request.dtype, request.dims, &device}).refusal;
  };
  BackendFactory factory = [](const BackendParams& params) -> std::unique_ptr<PrefillBackend> {
    return std::make_unique<gpu::GpuFlashBackend>(params, hopper_vendor);
  };
  return {std::move(description), std::move(factory)};
}

}  // namespace mla::simt
