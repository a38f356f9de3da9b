// Tile shapes of the HIP_FLASH kernel, one row per (qk head dim, v head dim)
// instantiation, chosen at compile time for each shape of
// cuda_hip/flash_shapes.def. A plain constexpr table read by the kernel, the
// launcher and the host tests; every row is checked (LDS budget, even loads,
// register budget).
#pragma once

#include <cstddef>

#include "cuda_hip/tile_table.hpp"
#include "mfma_layout.hpp"
#include "mla/detail/host_device.hpp"

namespace mla::hip_flash {

// A wave owns 32 query rows: the N side of its 32x32 products.
inline constexpr int wave_rows = mfma::tile;
// q, k, v and out are fp16 or bf16.
inline constexpr std::size_t element_bytes = 2;
// Global loads move 16-byte chunks (8 elements).
inline constexpr int chunk_elements = 8;
// LDS rows of K and V^T are padded by 8 bytes: the 32 rows one 8-byte operand
// read touches then start 2 banks apart instead of all in the same bank.
inline constexpr int lds_pad_elements = 4;
// LDS a workgroup may use on every CDNA part (gfx908 .. gfx950).
inline constexpr std::size_t lds_budget_bytes = 64 * 1024;
// Fragment registers per lane (Q operands, O^T and S^T accumulators); CDNA
// has 512 per lane with the accumulation registers, the rest is for addresses
// and softmax state.
inline constexpr int fragment_register_budget = 256;

struct FlashTileConfig {
  int head_dim_qk;
  int head_dim_v;
  int waves;       // per workgroup; each owns wave_rows query rows
  int block_cols;  // keys per iteration (Bc)

  MLA_HOST_DEVICE constexpr int threads() const { return waves * mfma::wave_size; }
  MLA_HOST_DEVICE constexpr int block_rows() const { return waves * wave_rows; }
  // Elements per LDS row: K is [block_cols][k_row], V^T is [head_dim_v][vt_row].
  MLA_HOST_DEVICE constexpr int k_row() const { return head_dim_qk + lds_pad_elements; }
  MLA_HOST_DEVICE constexpr int vt_row() const { return block_cols + lds_pad_elements; }
  MLA_HOST_DEVICE constexpr int k_tile_elements() const { return block_cols * k_row(); }
  MLA_HOST_DEVICE constexpr int vt_tile_elements() const { return head_dim_v * vt_row(); }
  MLA_HOST_DEVICE constexpr std::size_t lds_bytes() const {
    return static_cast<std::size_t>(k_tile_elements() + vt_tile_elements()) * element_bytes;
  }
  // Q as B operands (2 registers per k-step), O^T and S^T accumulators.
  MLA_HOST_DEVICE constexpr int fragment_registers() const {
    return head_dim_qk / mfma::k_step * 2 + head_dim_v / mfma::tile * mfma::accumulators +
           block_cols / mfma::tile * mfma::accumulators;
  }
};

// Chunks of a [rows, dim] tile spread evenly over the workgroup.
MLA_HOST_DEVICE constexpr bool loads_evenly(int rows, int dim, int threads) {
  return (rows * (dim / chunk_elements)) % threads == 0;
}

MLA_HOST_DEVICE constexpr bool is_valid(const FlashTileConfig& c) {
  return c.waves > 0 && c.head_dim_qk % mfma::k_step == 0 && c.head_dim_qk % chunk_elements == 0 &&
         c.head_dim_v % mfma::tile == 0 &&  // O^T comes in 32-row output tiles
         c.block_cols % mfma::tile == 0 &&  // S^T comes in 32-key tiles
         loads_evenly(c.block_cols, c.head_dim_qk, c.threads()) &&
         loads_evenly(c.block_cols, c.head_dim_v, c.threads()) && c.lds_bytes() <= lds_budget_bytes &&
         c.fragment_registers() <= fragment_register_budget;
}

// The tile of a (qk head dim, v head dim) pair: the first candidate that
// passes is_valid. Four waves share each K/V tile; 256/256 halves the key
// tile, since its K and V^T tiles of 64 keys would need 66.5 KiB of LDS. Every
// row takes more than half of a CU's 64 KiB LDS, so one workgroup (one wave
// per SIMD) runs per CU and the kernels may use the whole register file;
// smaller key tiles would allow two, at twice the barriers per key. Which is
// faster is unmeasured (it takes an AMD GPU), so the larger key tile comes first.
// CDNA3 (gfx942, MI300X) has the same budgets (64 KiB of LDS per CU, 512
// registers per lane at one wave per SIMD), so it gets the same rows: the table
// has no per-target rows. What limits it there, by this reasoning and
// unmeasured: 304 CUs hold 304 workgroups at once, so a call with fewer work
// items x heads leaves CUs idle (DeepSeek-V3 at TP8, 16 heads, needs 2432 query
// rows to fill them); one wave per SIMD hides global loads and the two barriers
// per key tile only by its own instruction-level parallelism (K and V are not
// double-buffered).
inline constexpr FlashTileConfig tile_candidates[] = {{0, 0, 4, 64}, {0, 0, 4, 32}};

// The instantiations: one row per shape of cuda_hip/flash_shapes.def (a pair
// listed twice gets two equal rows; lookups take the first).
inline constexpr FlashTileConfig flash_tile_configs[] = {
#define MLA_FLASH_SHAPE(nope, rope, v) gpu::first_fitting_tile(tile_candidates, (nope) + (rope), (v)),
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
};

static_assert(gpu::every_tile_is_valid(flash_tile_configs),
              "a shape of cuda_hip/flash_shapes.def has no HIP_FLASH tile that fits");

// The row for (dqk, dv), or null when no kernel was built for it.
MLA_HOST_DEVICE constexpr const FlashTileConfig* find_flash_tile_config(int head_dim_qk, int head_dim_v) {
  return gpu::find_tile(flash_tile_configs, head_dim_qk, head_dim_v);
}

template <int HeadDimQk, int HeadDimV>
MLA_HOST_DEVICE constexpr FlashTileConfig flash_tile_config() {
  static_assert(find_flash_tile_config(HeadDimQk, HeadDimV) != nullptr, "no tile configuration for these head dims");
  return *find_flash_tile_config(HeadDimQk, HeadDimV);
}

}  // namespace mla::hip_flash
