// The HIP_FLASH kernel sources compiled for the emulator (attention and the
// MFMA up-projection): a host clang (15 or newer, for ext_vector_type and
// _Float16) with MLA_SIMT_EMULATION, so that hip/mfma.hpp takes its device
// surface from simt/hip_device.hpp and its MFMA products from the emulator.
// Built by hip_emulated.cmake; the launchers mirror
// hip/flash_kernel_launch.hpp and hip/projection.hip.
#if !defined(MLA_SIMT_EMULATION)
#error "compile hip_flash_emulated.cpp with -DMLA_SIMT_EMULATION (hip_emulated.cmake does)"
#endif

#include "simt/hip_flash_emulated.hpp"

#include <cstddef>
#include <iterator>
#include <string>
#include <utility>

#include "hip/capability.hpp"
#include "hip/flash_kernel.hpp"
#include "hip/flash_launch_recipe.hpp"
#include "hip/projection_kernel.hpp"
#include "mla/error.hpp"
#include "simt/emulator.hpp"
#include "simt/hip_device.hpp"

namespace mla::simt {
namespace {

thread_local AmdTarget current_target = AmdTarget::gfx90a;

// One launch of an instantiation, as hip/flash_kernel_launch.hpp starts it.
template <DType D, int HeadDimQk, int HeadDimV, hip_flash::TileFamily Family, bool E4m3>
void start(const gpu::FlashParams& params) {
  const hip_flash::FlashLaunch recipe = hip_flash::plan_flash_launch<D, HeadDimQk, HeadDimV, Family, E4m3>(params);
  if (recipe.empty()) return;
  LaunchConfig config;
  config.kernel = recipe.kernel;
  config.grid = {recipe.grid[0], recipe.grid[1], recipe.grid[2]};
  config.block = {static_cast<unsigned>(recipe.threads), 1, 1};
  config.warp_size = hip_flash::mfma::wave_size;
  config.static_shared = static_lds();
  config.static_shared_bytes = static_lds_bytes();
  // As hip/flash_dispatch.hip: a launch with docs/contract.md §12's key
  // mask or sinks runs the instantiations that read them.
  if (params.mask.masks_keys() || params.mask.sinks != nullptr) {
    launch(config, [&params] { hip_flash::flash_forward_kernel<D, HeadDimQk, HeadDimV, Family, E4m3, true>(params); });
  } else {
    launch(config, [&params] { hip_flash::flash_forward_kernel<D, HeadDimQk, HeadDimV, Family, E4m3, false>(params); });
  }
}

template <DType D, int HeadDimQk, int HeadDimV>
void launch_e4m3(const gpu::FlashParams& params) {
  start<D, HeadDimQk, HeadDimV, hip_flash::TileFamily::cdna3, true>(params);
}

// The target for the duration of one launch.
class TargetScope {
 public:
  explicit TargetScope(AmdTarget target) : saved_(current_target) { current_target = target; }
  ~TargetScope() { current_target = saved_; }
  TargetScope(const TargetScope&) = delete;
  TargetScope& operator=(const TargetScope&) = delete;

 private:
  AmdTarget saved_;
};

template <DType D, int HeadDimQk, int HeadDimV, hip_flash::TileFamily Family>
void launch_emulated(const gpu::FlashParams& params) {
  // e4m3 inputs: CDNA3's rows only (the chooser refuses them elsewhere).
  if constexpr (Family == hip_flash::TileFamily::cdna3) {
    if (params.e4m3_inputs) return launch_e4m3<D, HeadDimQk, HeadDimV>(params);
  }
  start<D, HeadDimQk, HeadDimV, Family, false>(params);
}

// One launcher per row of flash_tile_configs; false when no row matches.
template <DType D, std::size_t... Row>
bool launch_for_dims(const gpu::FlashParams& params, int head_dim_qk, int head_dim_v, hip_flash::TileFamily family,
                     std::index_sequence<Row...>) {
  using hip_flash::flash_tile_configs;
  return ((flash_tile_configs[Row].head_dim_qk == head_dim_qk && flash_tile_configs[Row].head_dim_v == head_dim_v &&
           flash_tile_configs[Row].family == family &&
           (launch_emulated<D, flash_tile_configs[Row].head_dim_qk, flash_tile_configs[Row].head_dim_v,
                            flash_tile_configs[Row].family>(params),
            true)) ||
          ...);
}

template <DType D>
bool launch_for_dims(const gpu::FlashParams& params, int head_dim_qk, int head_dim_v, hip_flash::TileFamily family) {
  constexpr std::size_t rows = std::size(hip_flash::flash_tile_configs);
  return launch_for_dims<D>(params, head_dim_qk, head_dim_v, family, std::make_index_sequence<rows>{});
}

}  // namespace

AmdTarget emulated_amd_target() { return current_target; }

bool hip_flash_emulated_built() { return true; }

void launch_hip_flash_emulated(const gpu::FlashParams& params, DType dtype, int head_dim_qk, int head_dim_v,
                               AmdTarget target) {
  const TargetScope scope(target);
  const hip_flash::TileFamily family = hip_flash::tile_family(amd_target_name(target));
  if (params.e4m3_inputs && !hip_flash::is_e4m3_arch(amd_target_name(target))) {
    raise(ErrorCategory::not_supported, "emulated HIP_FLASH takes float8_e4m3 inputs on gfx942 only; the target is " +
                                            std::string(amd_target_name(target)));
  }
  bool launched = false;
  if (dtype == DType::bfloat16) {
    launched = launch_for_dims<DType::bfloat16>(params, head_dim_qk, head_dim_v, family);
  } else if (dtype == DType::float16) {
    launched = launch_for_dims<DType::float16>(params, head_dim_qk, head_dim_v, family);
  }
  if (!launched) {
    raise(ErrorCategory::not_supported, "emulated HIP_FLASH has no kernel for " + std::string(dtype_name(dtype)) +
                                            " with qk head dim " + std::to_string(head_dim_qk) + " and v head dim " +
                                            std::to_string(head_dim_v));
  }
}

void project_latents_hip_emulated(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
                                  const TensorView& v, AmdTarget target) {
  const TargetScope scope(target);
  hip_flash::projection::project_mfma_with(latents, kv_b_proj, k, v,
                                           [](auto kernel, const emulated::latent_kernel::LatentLaunch& how,
                                              const emulated::latent_kernel::ProjectParams& params) {
                                             LaunchConfig config;
                                             config.kernel = how.name;
                                             config.grid = {how.grid_x, how.grid_y, 1};
                                             config.block = {how.block_x, how.block_y, 1};
                                             config.warp_size = hip_flash::mfma::wave_size;
                                             launch(config, [&] { kernel(params); });
                                           });
}

}  // namespace mla::simt
