// The MFMA data flow of the HIP_FLASH kernel, checked on the host. The
// 32x32x8 and (gfx908) 32x32x4 products are emulated from the operand and
// accumulator tables in backends/hip/mfma_layout.hpp; fragments are built the
// way the kernel builds them, and the products must equal plain matrix
// products. No GPU can run here, so this is where a wrong lane or register
// mapping shows up.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hip/capability.hpp"
#include "hip/flash_config.hpp"
#include "hip/mfma_layout.hpp"

namespace mla::hip_flash {
namespace {

using mfma::accumulators;
using mfma::operand_values;
using mfma::tile;
using mfma::wave_size;

// One wave's registers: [lane][value].
using Operands = std::array<std::array<float, operand_values>, wave_size>;
using Accumulators = std::array<std::array<float, accumulators>, wave_size>;

// acc += A * B with A [32][8] and B [8][32] given as the wave's operands.
void emulate_32x32x8(Accumulators& acc, const Operands& a, const Operands& b) {
  float a_matrix[tile][mfma::k_step] = {};
  float b_matrix[mfma::k_step][tile] = {};
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int e = 0; e < operand_values; ++e) {
      a_matrix[mfma::operand_row(lane)][mfma::operand_k(lane, e)] = a[lane][e];
      b_matrix[mfma::operand_k(lane, e)][mfma::operand_row(lane)] = b[lane][e];
    }
  }
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int r = 0; r < accumulators; ++r) {
      float sum = 0.0f;
      for (int k = 0; k < mfma::k_step; ++k)
        sum += a_matrix[mfma::acc_row(lane, r)][k] * b_matrix[k][mfma::acc_col(lane)];
      acc[lane][r] += sum;
    }
  }
}

// gfx908's v_mfma_f32_32x32x4bf16 on values `first`, `first + 1` of each operand.
void emulate_32x32x4(Accumulators& acc, const Operands& a, const Operands& b, int first) {
  float a_matrix[tile][4] = {};
  float b_matrix[4][tile] = {};
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int e = 0; e < 2; ++e) {
      a_matrix[mfma::operand_row(lane)][mfma::narrow_operand_k(lane, e)] = a[lane][first + e];
      b_matrix[mfma::narrow_operand_k(lane, e)][mfma::operand_row(lane)] = b[lane][first + e];
    }
  }
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int r = 0; r < accumulators; ++r) {
      float sum = 0.0f;
      for (int k = 0; k < 4; ++k) sum += a_matrix[mfma::acc_row(lane, r)][k] * b_matrix[k][mfma::acc_col(lane)];
      acc[lane][r] += sum;
    }
  }
}

// Small integers: every product and sum is exact in float, so equality is exact.
std::vector<float> random_matrix(std::mt19937& rng, int rows, int cols) {
  std::uniform_int_distribution<int> value(-4, 4);
  std::vector<float> m(static_cast<std::size_t>(rows * cols));
  for (float& x : m) {
    do {
      x = static_cast<float>(value(rng));
    } while (x == 0.0f);  // a zero would hide a missing term
  }
  return m;
}

TEST(MfmaLayout, OperandsCoverEveryElementOnce) {
  std::array<int, tile * mfma::k_step> seen{};
  std::array<int, tile * tile> seen_acc{};
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int e = 0; e < operand_values; ++e) ++seen[mfma::operand_row(lane) * mfma::k_step + mfma::operand_k(lane, e)];
    for (int r = 0; r < accumulators; ++r) ++seen_acc[mfma::acc_row(lane, r) * tile + mfma::acc_col(lane)];
  }
  for (int count : seen) EXPECT_EQ(count, 1);
  for (int count : seen_acc) EXPECT_EQ(count, 1);
}

// S^T = K Q^T over a 192-wide head dim, then O^T += V^T P^T with P^T taken
// from the S^T accumulators through p_register, exactly as the kernel does.
TEST(MfmaLayout, TransposedProductsOfOneKeyTile) {
  constexpr int dqk = 192;
  constexpr int dv = 64;
  std::mt19937 rng(7);
  const std::vector<float> q = random_matrix(rng, tile, dqk);  // [query][dim]
  const std::vector<float> k = random_matrix(rng, tile, dqk);  // [key][dim]
  const std::vector<float> v = random_matrix(rng, tile, dv);   // [key][dim]

  // Q^T as B operands, K as A operands (the kernel's q_ops and k_lds reads).
  Accumulators s{};
  for (int step = 0; step < dqk / mfma::k_step; ++step) {
    Operands a{}, b{};
    for (int lane = 0; lane < wave_size; ++lane) {
      for (int e = 0; e < operand_values; ++e) {
        const int dim = step * mfma::k_step + mfma::operand_k(lane, e);
        a[lane][e] = k[static_cast<std::size_t>(mfma::operand_row(lane) * dqk + dim)];
        b[lane][e] = q[static_cast<std::size_t>(mfma::operand_row(lane) * dqk + dim)];
      }
    }
    emulate_32x32x8(s, a, b);
  }
  // Lane l holds row l % 32 of S: its query is acc_col, its keys acc_row.
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int r = 0; r < accumulators; ++r) {
      float expected = 0.0f;
      for (int d = 0; d < dqk; ++d) {
        expected += q[static_cast<std::size_t>(mfma::acc_col(lane) * dqk + d)] *
                    k[static_cast<std::size_t>(mfma::acc_row(lane, r) * dqk + d)];
      }
      ASSERT_EQ(s[lane][r], expected) << "lane " << lane << " register " << r;
    }
  }

  // O^T = V^T P^T with P = S (no softmax: the data flow is what is tested).
  std::array<Accumulators, dv / tile> o{};
  for (int step = 0; step < tile / mfma::k_step; ++step) {
    Operands p_op{};
    for (int lane = 0; lane < wave_size; ++lane) {
      for (int e = 0; e < operand_values; ++e) p_op[lane][e] = s[lane][mfma::p_register(step, e)];
    }
    for (int t = 0; t < dv / tile; ++t) {
      Operands v_op{};  // the kernel's vt_lds read: V^T row = output dim, 4 consecutive keys
      for (int lane = 0; lane < wave_size; ++lane) {
        for (int e = 0; e < operand_values; ++e) {
          const int key = step * mfma::k_step + mfma::operand_k(lane, e);
          v_op[lane][e] = v[static_cast<std::size_t>(key * dv + t * tile + mfma::operand_row(lane))];
        }
      }
      emulate_32x32x8(o[static_cast<std::size_t>(t)], v_op, p_op);
    }
  }
  for (int t = 0; t < dv / tile; ++t) {
    for (int lane = 0; lane < wave_size; ++lane) {
      for (int r = 0; r < accumulators; ++r) {
        const int query = mfma::acc_col(lane);
        const int dim = t * tile + mfma::acc_row(lane, r);
        float expected = 0.0f;
        for (int key = 0; key < tile; ++key) {
          float score = 0.0f;
          for (int d = 0; d < dqk; ++d) {
            score += q[static_cast<std::size_t>(query * dqk + d)] * k[static_cast<std::size_t>(key * dqk + d)];
          }
          expected += score * v[static_cast<std::size_t>(key * dv + dim)];
        }
        ASSERT_EQ(o[static_cast<std::size_t>(t)][lane][r], expected)
            << "tile " << t << " lane " << lane << " register " << r;
      }
    }
  }
}

// gfx908 bf16: two 2-wide products on the halves of the 4-wide operands give
// the 4-wide product.
TEST(MfmaLayout, NarrowBf16ProductsSumToTheWideOne) {
  std::mt19937 rng(11);
  const std::vector<float> a_matrix = random_matrix(rng, tile, mfma::k_step);
  const std::vector<float> b_matrix = random_matrix(rng, mfma::k_step, tile);
  Operands a{}, b{};
  for (int lane = 0; lane < wave_size; ++lane) {
    for (int e = 0; e < operand_values; ++e) {
      a[lane][e] =
          a_matrix[static_cast<std::size_t>(mfma::operand_row(lane) * mfma::k_step + mfma::operand_k(lane, e))];
      b[lane][e] = b_matrix[static_cast<std::size_t>(mfma::operand_k(lane, e) * tile + mfma::operand_row(lane))];
    }
  }
  Accumulators wide{}, narrow{};
  emulate_32x32x8(wide, a, b);
  emulate_32x32x4(narrow, a, b, 0);
  emulate_32x32x4(narrow, a, b, 2);
  EXPECT_EQ(wide, narrow);
}

// The row statistics of a lane pair: lanes l and l ^ 32 hold the same query
// row and, between them, every key of a 32-key tile exactly once.
TEST(MfmaLayout, LanePairsShareARowAndSplitItsKeys) {
  for (int lane = 0; lane < tile; ++lane) {
    const int partner = lane ^ tile;
    EXPECT_EQ(mfma::acc_col(lane), mfma::acc_col(partner));
    std::array<int, tile> keys{};
    for (int r = 0; r < accumulators; ++r) {
      ++keys[static_cast<std::size_t>(mfma::acc_row(lane, r))];
      ++keys[static_cast<std::size_t>(mfma::acc_row(partner, r))];
    }
    for (int count : keys) EXPECT_EQ(count, 1);
  }
}

TEST(FlashTileConfig, EveryRowFitsTheHardware) {
  for (const FlashTileConfig& c : flash_tile_configs) {
    SCOPED_TRACE(std::to_string(c.head_dim_qk) + "/" + std::to_string(c.head_dim_v));
    EXPECT_TRUE(is_valid(c));
    // Every workgroup the row is sized to keep on one CU fits its LDS.
    EXPECT_LE(c.lds_bytes() * static_cast<std::size_t>(c.workgroups_per_cu), lds_budget_bytes);
    EXPECT_EQ(c.waves_per_simd() * simds_per_cu, c.waves * c.workgroups_per_cu);
    EXPECT_EQ(c.block_rows(), c.waves * wave_rows);
    EXPECT_LE(c.threads(), 1024);  // the HIP runtime's workgroup limit
    // Row starts in LDS stay 8-byte aligned for the operand reads.
    EXPECT_EQ(c.k_row() * static_cast<int>(element_bytes) % 8, 0);
    EXPECT_EQ(c.vt_row() * static_cast<int>(element_bytes) % 8, 0);
    EXPECT_EQ(find_flash_tile_config(c.head_dim_qk, c.head_dim_v, c.family), &c);
  }
  EXPECT_EQ(find_flash_tile_config(192, 192), nullptr);
  EXPECT_EQ(find_flash_tile_config(64, 64, TileFamily::cdna3), nullptr);
}

// Every shape has a row per generation, with the same query rows per block
// (the work lists are planned before the device is known). CDNA3's rows of
// 192/128 and 128/128 take 32-key tiles for two workgroups per CU; 256/256
// fits only once and keeps CDNA1/2's tile.
TEST(FlashTileConfig, EveryShapeHasARowPerGeneration) {
  for (const FlashTileConfig& c : flash_tile_configs) {
    for (const TileFamily family : tile_families) {
      const FlashTileConfig* row = find_flash_tile_config(c.head_dim_qk, c.head_dim_v, family);
      ASSERT_NE(row, nullptr) << c.head_dim_qk << "/" << c.head_dim_v << " " << tile_family_name(family);
      EXPECT_EQ(row->block_rows(), c.block_rows());
    }
  }
  for (const auto& [qk, v] : {std::pair{192, 128}, std::pair{128, 128}}) {
    const FlashTileConfig& row = *find_flash_tile_config(qk, v, TileFamily::cdna3);
    EXPECT_EQ(row.block_cols, 32) << qk;
    EXPECT_EQ(row.workgroups_per_cu, 2) << qk;
    EXPECT_EQ(row.waves_per_simd(), 2) << qk;
    EXPECT_EQ(find_flash_tile_config(qk, v)->workgroups_per_cu, 1) << qk;
  }
  const FlashTileConfig& big = *find_flash_tile_config(256, 256, TileFamily::cdna3);
  EXPECT_EQ(big.workgroups_per_cu, 1);
  EXPECT_EQ(big.block_cols, find_flash_tile_config(256, 256)->block_cols);
}

TEST(FlashTileConfig, GenerationOfEachArch) {
  for (const char* arch : {"gfx940", "gfx941", "gfx942", "gfx950"})
    EXPECT_EQ(tile_family(arch), TileFamily::cdna3) << arch;
  for (const char* arch : {"gfx908", "gfx90a", "gfx1100", "gfx94", "gfx9420", ""}) {
    EXPECT_EQ(tile_family(arch), TileFamily::cdna12) << arch;
  }
}

TEST(FlashTileConfig, PaddingSpreadsOperandReadsOverBanks) {
  // 32 lanes read 8 bytes from 32 consecutive LDS rows; with 32 banks of 4
  // bytes the row pitch in dwords must not be a multiple of 32 (all rows in
  // one bank) nor of 16, or the reads serialise.
  for (const FlashTileConfig& c : flash_tile_configs) {
    const int k_pitch = c.k_row() * static_cast<int>(element_bytes) / 4;
    const int vt_pitch = c.vt_row() * static_cast<int>(element_bytes) / 4;
    EXPECT_NE(k_pitch % 16, 0) << c.head_dim_qk;
    EXPECT_NE(vt_pitch % 16, 0) << c.block_cols;
  }
}

}  // namespace
}  // namespace mla::hip_flash
