// The kernel's data movement replayed on the host: shared-memory tiles laid
// out with the XOR swizzle, ldmatrix and mma.sync.m16n8k16 emulated from the
// PTX ISA's fragment tables, and the kernel's address arithmetic
// (fragment_layout.hpp) driving them. If any index function or the P re-pack
// were wrong, S = Q K^T or O = P V would come out permuted.
//
// Values are small multiples of 1/8, exact in bf16 and fp32, so the emulated
// products must match the plain matrix products exactly.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "flash_config.hpp"
#include "fragment_layout.hpp"
#include "mla/detail/numeric.hpp"

namespace mla::cuda_flash {
namespace {

constexpr int lanes = 32;
using Regs = std::array<std::array<std::uint32_t, 4>, lanes>;
using Matrix = std::vector<std::vector<float>>;

Matrix random_matrix(int rows, int cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> eighths(-16, 16);
  Matrix m(static_cast<std::size_t>(rows), std::vector<float>(static_cast<std::size_t>(cols)));
  for (auto& row : m) {
    for (float& x : row) x = static_cast<float>(eighths(rng)) / 8.0f;
  }
  return m;
}

float at(const Matrix& m, int r, int c) { return m[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]; }

// A [rows, dim] bf16 tile in "shared memory", stored where the cp.async
// loader puts it: chunk c of row r at tile_offset(r, c).
std::vector<std::uint8_t> store_tile(const Matrix& m, int dim) {
  const int row_chunks = dim / chunk_elements;
  std::vector<std::uint8_t> bytes(m.size() * static_cast<std::size_t>(dim) * 2);
  for (int r = 0; r < static_cast<int>(m.size()); ++r) {
    for (int c = 0; c < dim; ++c) {
      const std::uint16_t bits = numeric::float_to_bf16(at(m, r, c));
      const std::uint32_t offset = layout::tile_offset(r, c / chunk_elements, row_chunks) + (c % chunk_elements) * 2;
      std::memcpy(&bytes[offset], &bits, 2);
    }
  }
  return bytes;
}

std::uint16_t load16(const std::vector<std::uint8_t>& smem, std::uint32_t address) {
  std::uint16_t bits = 0;
  std::memcpy(&bits, &smem.at(address), 2);
  return bits;
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16, per the PTX ISA: lane l
// supplies the address of row l % 8 of matrix l / 8; register m of lane l
// holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix m (with
// .trans: rows 2 (l % 4), 2 (l % 4) + 1 of column l / 4).
Regs ldmatrix_x4(const std::vector<std::uint8_t>& smem, const std::array<std::uint32_t, lanes>& address, bool trans) {
  Regs regs{};
  for (int lane = 0; lane < lanes; ++lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    for (int m = 0; m < 4; ++m) {
      const auto element = [&](int row, int col) {
        return load16(smem, address[static_cast<std::size_t>(8 * m + row)] + static_cast<std::uint32_t>(col * 2));
      };
      const std::uint16_t lo = trans ? element(2 * t, g) : element(g, 2 * t);
      const std::uint16_t hi = trans ? element(2 * t + 1, g) : element(g, 2 * t + 1);
      regs[static_cast<std::size_t>(lane)][static_cast<std::size_t>(m)] =
          static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
    }
  }
  return regs;
}

float lo_half(std::uint32_t r) { return numeric::bf16_to_float(static_cast<std::uint16_t>(r & 0xffffu)); }
float hi_half(std::uint32_t r) { return numeric::bf16_to_float(static_cast<std::uint16_t>(r >> 16)); }

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 per the PTX ISA's
// fragment tables (g = lane / 4, t = lane % 4).
void mma(std::array<std::array<float, 4>, lanes>& c, const Regs& a,
         const std::array<std::array<std::uint32_t, 2>, lanes>& b) {
  float A[16][16] = {};
  float B[16][8] = {};
  for (int lane = 0; lane < lanes; ++lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    const auto& ra = a[static_cast<std::size_t>(lane)];
    A[g][2 * t] = lo_half(ra[0]);
    A[g][2 * t + 1] = hi_half(ra[0]);
    A[g + 8][2 * t] = lo_half(ra[1]);
    A[g + 8][2 * t + 1] = hi_half(ra[1]);
    A[g][2 * t + 8] = lo_half(ra[2]);
    A[g][2 * t + 9] = hi_half(ra[2]);
    A[g + 8][2 * t + 8] = lo_half(ra[3]);
    A[g + 8][2 * t + 9] = hi_half(ra[3]);
    const auto& rb = b[static_cast<std::size_t>(lane)];
    B[2 * t][g] = lo_half(rb[0]);
    B[2 * t + 1][g] = hi_half(rb[0]);
    B[2 * t + 8][g] = lo_half(rb[1]);
    B[2 * t + 9][g] = hi_half(rb[1]);
  }
  for (int lane = 0; lane < lanes; ++lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e / 2) * 8;
      const int col = 2 * t + e % 2;
      float sum = 0.0f;
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      c[static_cast<std::size_t>(lane)][static_cast<std::size_t>(e)] += sum;
    }
  }
}

std::uint32_t host_pack(float lo, float hi) {
  return static_cast<std::uint32_t>(numeric::float_to_bf16(lo)) |
         (static_cast<std::uint32_t>(numeric::float_to_bf16(hi)) << 16);
}

// One warp (warp index 1, rows 16..31 of a 32-row Q tile) running the
// kernel's S = Q K^T and O = P V loops with the kernel's address arithmetic.
template <int HeadDimQk, int HeadDimV, int BlockCols>
void check_warp_products(std::uint32_t seed) {
  constexpr int block_rows = 32;
  constexpr int warp_row = 16;
  constexpr int qk_chunks = HeadDimQk / chunk_elements;
  constexpr int v_chunks = HeadDimV / chunk_elements;
  constexpr std::uint32_t qk_row_bytes = qk_chunks * 16;
  constexpr std::uint32_t v_row_bytes = v_chunks * 16;
  constexpr int s_tiles = BlockCols / 8;
  constexpr int o_tiles = HeadDimV / 8;
  std::mt19937 rng(seed);
  const Matrix q = random_matrix(block_rows, HeadDimQk, rng);
  const Matrix k = random_matrix(BlockCols, HeadDimQk, rng);
  const Matrix v = random_matrix(BlockCols, HeadDimV, rng);
  const auto q_smem = store_tile(q, HeadDimQk);
  const auto k_smem = store_tile(k, HeadDimQk);
  const auto v_smem = store_tile(v, HeadDimV);

  // S = Q K^T.
  std::array<std::array<std::array<float, 4>, lanes>, s_tiles> s{};
  for (int ks = 0; ks < HeadDimQk / 16; ++ks) {
    std::array<std::uint32_t, lanes> q_address{};
    for (int lane = 0; lane < lanes; ++lane) {
      q_address[static_cast<std::size_t>(lane)] =
          static_cast<std::uint32_t>(warp_row + layout::a_row(lane)) * qk_row_bytes + layout::step_group_offset(ks) +
          layout::lane_step_offset(lane, layout::a_parity(lane), ks % 4);
    }
    const Regs a = ldmatrix_x4(q_smem, q_address, false);
    for (int np = 0; np < s_tiles / 2; ++np) {
      std::array<std::uint32_t, lanes> k_address{};
      for (int lane = 0; lane < lanes; ++lane) {
        k_address[static_cast<std::size_t>(lane)] = static_cast<std::uint32_t>(layout::k_key(lane)) * qk_row_bytes +
                                                    layout::step_group_offset(ks) +
                                                    layout::lane_step_offset(lane, layout::k_parity(lane), ks % 4) +
                                                    static_cast<std::uint32_t>(np * 16) * qk_row_bytes;
      }
      const Regs b = ldmatrix_x4(k_smem, k_address, false);
      std::array<std::array<std::uint32_t, 2>, lanes> b0{};
      std::array<std::array<std::uint32_t, 2>, lanes> b1{};
      for (std::size_t lane = 0; lane < lanes; ++lane) {
        b0[lane] = {b[lane][0], b[lane][1]};
        b1[lane] = {b[lane][2], b[lane][3]};
      }
      mma(s[static_cast<std::size_t>(2 * np)], a, b0);
      mma(s[static_cast<std::size_t>(2 * np + 1)], a, b1);
    }
  }
  for (int lane = 0; lane < lanes; ++lane) {
    for (int j = 0; j < s_tiles; ++j) {
      for (int e = 0; e < 4; ++e) {
        const int row = warp_row + layout::acc_row(lane, e);
        const int key = j * 8 + layout::acc_col(lane, e);
        float expected = 0.0f;
        for (int d = 0; d < HeadDimQk; ++d) expected += at(q, row, d) * at(k, key, d);
        ASSERT_EQ(s[static_cast<std::size_t>(j)][static_cast<std::size_t>(lane)][static_cast<std::size_t>(e)], expected)
            << "S row " << row << " key " << key;
      }
    }
  }

  // P: S's accumulators, re-packed as the kernel does (values stay exact in bf16).
  Matrix p(16, std::vector<float>(BlockCols));
  for (int lane = 0; lane < lanes; ++lane) {
    for (int j = 0; j < s_tiles; ++j) {
      for (int e = 0; e < 4; ++e) {
        const float value =
            s[static_cast<std::size_t>(j)][static_cast<std::size_t>(lane)][static_cast<std::size_t>(e)] / 64.0f;
        s[static_cast<std::size_t>(j)][static_cast<std::size_t>(lane)][static_cast<std::size_t>(e)] = value;
        p[static_cast<std::size_t>(layout::acc_row(lane, e))]
         [static_cast<std::size_t>(j * 8 + layout::acc_col(lane, e))] =
             numeric::bf16_to_float(numeric::float_to_bf16(value));
      }
    }
  }
  std::array<std::array<std::array<float, 4>, lanes>, o_tiles> o{};
  for (int ks = 0; ks < BlockCols / 16; ++ks) {
    Regs a{};
    for (int lane = 0; lane < lanes; ++lane) {
      float lane_s[s_tiles][4];
      for (int j = 0; j < s_tiles; ++j) {
        for (int e = 0; e < 4; ++e)
          lane_s[j][e] = s[static_cast<std::size_t>(j)][static_cast<std::size_t>(lane)][static_cast<std::size_t>(e)];
      }
      std::uint32_t frag[4];
      layout::p_fragment(frag, lane_s, ks, host_pack);
      for (int i = 0; i < 4; ++i) a[static_cast<std::size_t>(lane)][static_cast<std::size_t>(i)] = frag[i];
    }
    for (int np = 0; np < o_tiles / 2; ++np) {
      std::array<std::uint32_t, lanes> v_address{};
      for (int lane = 0; lane < lanes; ++lane) {
        v_address[static_cast<std::size_t>(lane)] = static_cast<std::uint32_t>(layout::v_key(lane)) * v_row_bytes +
                                                    static_cast<std::uint32_t>(ks * 16) * v_row_bytes +
                                                    layout::step_group_offset(np) +
                                                    layout::lane_step_offset(lane, layout::v_parity(lane), np % 4);
      }
      const Regs b = ldmatrix_x4(v_smem, v_address, true);
      std::array<std::array<std::uint32_t, 2>, lanes> b0{};
      std::array<std::array<std::uint32_t, 2>, lanes> b1{};
      for (std::size_t lane = 0; lane < lanes; ++lane) {
        b0[lane] = {b[lane][0], b[lane][1]};
        b1[lane] = {b[lane][2], b[lane][3]};
      }
      mma(o[static_cast<std::size_t>(2 * np)], a, b0);
      mma(o[static_cast<std::size_t>(2 * np + 1)], a, b1);
    }
  }
  for (int lane = 0; lane < lanes; ++lane) {
    for (int n = 0; n < o_tiles; ++n) {
      for (int e = 0; e < 4; ++e) {
        const int row = layout::acc_row(lane, e);
        const int col = n * 8 + layout::acc_col(lane, e);
        double expected = 0.0;
        for (int key = 0; key < BlockCols; ++key) expected += static_cast<double>(at(p, row, key)) * at(v, key, col);
        ASSERT_NEAR(o[static_cast<std::size_t>(n)][static_cast<std::size_t>(lane)][static_cast<std::size_t>(e)],
                    expected, 1e-4 * (1.0 + std::fabs(expected)))
            << "O row " << row << " col " << col;
      }
    }
  }
}

TEST(FragmentLayout, WarpProductsDeepSeek) { check_warp_products<192, 128, 64>(1); }
TEST(FragmentLayout, WarpProductsEqualDims) { check_warp_products<128, 128, 64>(2); }
TEST(FragmentLayout, WarpProductsWide) { check_warp_products<256, 256, 32>(3); }

// The decomposed addresses the kernel uses equal the swizzled tile offsets.
TEST(FragmentLayout, DecomposedAddressesEqualTileOffsets) {
  for (int row_chunks : {16, 24, 32}) {
    for (int row = 0; row < 128; ++row) {
      for (int lane = 0; lane < lanes; ++lane) {
        if (row % 8 != lane % 8) continue;
        for (int parity = 0; parity < 2; ++parity) {
          for (int step = 0; step < row_chunks / 2; ++step) {
            EXPECT_EQ(static_cast<std::uint32_t>(row * row_chunks * 16) + layout::step_group_offset(step) +
                          layout::lane_step_offset(lane, parity, step % 4),
                      layout::tile_offset(row, 2 * step + parity, row_chunks));
          }
        }
      }
    }
  }
}

// Shared memory has 32 banks of 4 bytes: the 8 16-byte rows one ldmatrix
// phase (8 lanes) reads are conflict-free when they fall in 8 different
// 128-byte bank windows. Same for 8 consecutive threads of the loader.
TEST(FragmentLayout, SwizzleAvoidsBankConflicts) {
  for (int row_chunks : {16, 24, 32}) {
    for (int first_row = 0; first_row < 64; first_row += 8) {
      for (int chunk = 0; chunk < row_chunks; ++chunk) {
        std::set<std::uint32_t> windows;
        for (int r = 0; r < 8; ++r) windows.insert(layout::tile_offset(first_row + r, chunk, row_chunks) / 16 % 8);
        EXPECT_EQ(windows.size(), 8u) << "ldmatrix rows " << first_row << ".. chunk " << chunk;
      }
      // The loader: 8 consecutive threads write 8 consecutive chunks of one row.
      for (int chunk = 0; chunk + 8 <= row_chunks; chunk += 8) {
        std::set<std::uint32_t> windows;
        for (int c = 0; c < 8; ++c) windows.insert(layout::tile_offset(first_row, chunk + c, row_chunks) / 16 % 8);
        EXPECT_EQ(windows.size(), 8u);
      }
    }
  }
}

TEST(FlashConfig, EveryRowIsValidAndItsRegionsFit) {
  for (const FlashTileConfig& c : flash_tile_configs) {
    SCOPED_TRACE(std::to_string(c.head_dim_qk) + "/" + std::to_string(c.head_dim_v));
    EXPECT_TRUE(is_valid(c));
    EXPECT_EQ(find_flash_tile_config(c.head_dim_qk, c.head_dim_v), &c);
    EXPECT_LE(c.shared_bytes(), portable_shared_bytes);
    // Stage 1 ends where Q may start; Q ends inside the allocation.
    EXPECT_GE(c.q_offset(), c.stage_bytes());
    EXPECT_LE(c.q_offset() + c.q_tile_bytes(), c.shared_bytes());
    EXPECT_LE(2 * c.stage_bytes(), c.shared_bytes());
    if (!c.q_in_registers) {
      EXPECT_GE(c.q_offset(), 2 * c.stage_bytes());
    }
  }
  EXPECT_EQ(find_flash_tile_config(192, 192), nullptr);
}

TEST(FlashConfig, LoaderSegmentsCoverRows) {
  EXPECT_EQ(segment_width(24, 256), 16);
  EXPECT_EQ(segment_width(8, 256), 8);
  EXPECT_EQ(segment_width(32, 128), 32);
  EXPECT_TRUE(loads_evenly(64, 192, 256));
  EXPECT_FALSE(loads_evenly(8, 192, 256));  // 16 rows per pass do not fit 8 rows
}

}  // namespace
}  // namespace mla::cuda_flash
