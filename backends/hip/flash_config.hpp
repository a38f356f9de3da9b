// Tile shapes of the HIP_FLASH kernel, one row per (qk head dim, v head dim)
// instantiation and AMD generation (TileFamily), chosen at compile time for
// each shape of cuda_hip/flash_shapes.def; the launch picks the family of the
// queue's device. A plain constexpr table read by the kernel, the launcher
// and the host tests; every row is checked (LDS budget, even loads, register
// budget, occupancy).
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
// LDS of a CU on every CDNA part from gfx908 to gfx942 (gfx950 has more).
inline constexpr std::size_t lds_budget_bytes = 64 * 1024;
// Fragment registers per lane (Q operands, O^T and S^T accumulators) at one
// wave per SIMD; CDNA has 512 per lane with the accumulation registers, the
// rest is for addresses and softmax state. Both budgets are shared by the
// workgroups a row is sized to run side by side on one CU.
inline constexpr int fragment_register_budget = 256;
// SIMDs per CU: a workgroup's waves spread over them.
inline constexpr int simds_per_cu = 4;

// The generations with rows of their own: CDNA1/2 (gfx908, gfx90a) and
// CDNA3 (gfx940-942; gfx950, CDNA4, takes CDNA3's rows until it is measured).
// The values are those of MLA_AMD_TILE_FAMILY in mfma.hpp.
enum class TileFamily : int { cdna12 = 0, cdna3 = 1 };

inline constexpr TileFamily tile_families[] = {TileFamily::cdna12, TileFamily::cdna3};

// "cdna1/2" or "cdna3", for launch errors and test names.
MLA_HOST_DEVICE constexpr const char* tile_family_name(TileFamily family) {
  return family == TileFamily::cdna3 ? "cdna3" : "cdna1/2";
}

struct FlashTileConfig {
  int head_dim_qk;
  int head_dim_v;
  int waves;       // per workgroup; each owns wave_rows query rows
  int block_cols;  // keys per iteration (Bc)
  TileFamily family = TileFamily::cdna12;
  // Workgroups the row is sized to keep resident per CU: LDS and registers
  // are split this many ways, and the kernel asks the compiler for the
  // matching occupancy (__launch_bounds__' waves per SIMD).
  int workgroups_per_cu = 1;

  MLA_HOST_DEVICE constexpr int threads() const { return waves * mfma::wave_size; }
  MLA_HOST_DEVICE constexpr int block_rows() const { return waves * wave_rows; }
  MLA_HOST_DEVICE constexpr int waves_per_simd() const { return workgroups_per_cu * waves / simds_per_cu; }
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
  return c.waves > 0 && c.workgroups_per_cu > 0 && c.waves % simds_per_cu == 0 && c.head_dim_qk % mfma::k_step == 0 &&
         c.head_dim_qk % chunk_elements == 0 && c.head_dim_v % mfma::tile == 0 &&  // O^T comes in 32-row output tiles
         c.block_cols % mfma::tile == 0 &&                                         // S^T comes in 32-key tiles
         loads_evenly(c.block_cols, c.head_dim_qk, c.threads()) &&
         loads_evenly(c.block_cols, c.head_dim_v, c.threads()) &&
         c.lds_bytes() * static_cast<std::size_t>(c.workgroups_per_cu) <= lds_budget_bytes &&
         c.fragment_registers() * c.workgroups_per_cu <= fragment_register_budget;
}

// The tile of a (qk head dim, v head dim) pair and a family: the first of the
// family's candidates that passes is_valid.
//
// CDNA1/2: four waves share each K/V tile; 256/256 halves the key tile, since
// its K and V^T tiles of 64 keys would need 66.5 KiB of LDS. Every row takes
// more than half of a CU's 64 KiB LDS, so one workgroup (one wave per SIMD)
// runs per CU and the kernels may use the whole register file; smaller key
// tiles would allow two, at twice the barriers per key. Which is faster is
// unmeasured (it takes an AMD GPU), so the larger key tile comes first.
//
// CDNA3 (MI300X): the same LDS (64 KiB per CU) and registers (512 per lane),
// but twice the MFMA rate per CU (a 32x32x8 bf16 or fp16 product takes 8
// passes, 16 on gfx90a; about 1307 TF/s dense over 304 CUs at 2.1 GHz). A
// key tile's MFMA work is then done in half the cycles, while the global
// loads, the LDS stores and the two barriers around them take as long as
// before; with one workgroup per CU nothing else runs meanwhile. So CDNA3
// takes 32-key tiles sized for two workgroups per CU (2 waves per SIMD: each
// workgroup at most 32 KiB of LDS and 256 registers per lane), so that one
// workgroup's MFMAs overlap the other's loads and barriers. DeepSeek's
// 192/128 takes 21.25 KiB and 128 fragment registers, 128/128 17.25 KiB; 256/256
// does not fit twice (208 fragment registers) and keeps the CDNA1/2 row.
// What limits it there, by this reasoning and unmeasured: twice the barriers
// per key; the LDS bandwidth per CU (128 bytes per clock) is unchanged, and
// every wave reads each K and V^T tile once, so LDS reads take about half the
// MFMA time at 192/128; and 304 CUs hold 608 such workgroups, so a call with
// fewer work items x heads leaves CUs idle (DeepSeek-V3 at TP8, 16 heads,
// needs 4864 query rows to fill them).
inline constexpr FlashTileConfig cdna12_candidates[] = {{0, 0, 4, 64, TileFamily::cdna12, 1},
                                                        {0, 0, 4, 32, TileFamily::cdna12, 1}};
inline constexpr FlashTileConfig cdna3_candidates[] = {
    {0, 0, 4, 32, TileFamily::cdna3, 2}, {0, 0, 4, 64, TileFamily::cdna3, 1}, {0, 0, 4, 32, TileFamily::cdna3, 1}};

// The instantiations: per shape of cuda_hip/flash_shapes.def one row per
// family (a pair listed twice gets equal rows; lookups take the first).
inline constexpr FlashTileConfig flash_tile_configs[] = {
#define MLA_FLASH_SHAPE(nope, rope, v)                              \
  gpu::first_fitting_tile(cdna12_candidates, (nope) + (rope), (v)), \
      gpu::first_fitting_tile(cdna3_candidates, (nope) + (rope), (v)),
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
};

static_assert(gpu::every_tile_is_valid(flash_tile_configs),
              "a shape of cuda_hip/flash_shapes.def has no HIP_FLASH tile that fits");

// The row for (dqk, dv) and a family, or null when no kernel was built for it.
MLA_HOST_DEVICE constexpr const FlashTileConfig* find_flash_tile_config(int head_dim_qk, int head_dim_v,
                                                                        TileFamily family = TileFamily::cdna12) {
  for (const FlashTileConfig& tile : flash_tile_configs) {
    if (tile.head_dim_qk == head_dim_qk && tile.head_dim_v == head_dim_v && tile.family == family) return &tile;
  }
  return nullptr;
}

// The work lists are planned before the device is known, from the query rows
// per block: every family's row of a shape has the same.
MLA_HOST_DEVICE constexpr bool families_share_block_rows() {
  for (const FlashTileConfig& tile : flash_tile_configs) {
    if (find_flash_tile_config(tile.head_dim_qk, tile.head_dim_v)->block_rows() != tile.block_rows()) return false;
  }
  return true;
}
static_assert(families_share_block_rows(), "a shape's HIP_FLASH rows differ in query rows per block");

template <int HeadDimQk, int HeadDimV, TileFamily Family = TileFamily::cdna12>
MLA_HOST_DEVICE constexpr FlashTileConfig flash_tile_config() {
  static_assert(find_flash_tile_config(HeadDimQk, HeadDimV, Family) != nullptr,
                "no tile configuration for these head dims");
  return *find_flash_tile_config(HeadDimQk, HeadDimV, Family);
}

}  // namespace mla::hip_flash
