// The emulator's reading of the sm_90 layouts (simt/sm90_layout.hpp) and of
// the e4m3 mma.sync fragments (simt/sm80_layout.hpp) against
// an independent one: CUTLASS/CuTe's swizzle functors, GMMA layout atoms,
// descriptor builder (make_gmma_desc) and wgmma fragment layouts. A misreading
// of the ISA shared by the emulator and a kernel would pass the probes; here it
// must also agree with CuTe. Host only; CuTe's headers are never shipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cute/atom/mma_traits_sm89.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include "simt/sm80_layout.hpp"
#include "simt/sm90_layout.hpp"

namespace {

using namespace cute;
namespace layout = mla::simt::sm90_layout;
using bf16 = cutlass::bfloat16_t;

// make_gmma_desc reads a shared address, which host code cannot form: CuTe
// prints a notice and uses 0. The offsets are what is compared, so start
// stays 0 and the notice is kept out of the test's output.
template <class F>
std::uint64_t quietly(F&& make) {
  std::fflush(stdout);
  const int saved = dup(1);
  std::FILE* null = std::fopen("/dev/null", "w");
  dup2(fileno(null), 1);
  const std::uint64_t bits = make();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::fclose(null);
  return bits;
}

TEST(CuteCrossCheck, SwizzlePatternsMatchCuteSwizzles) {
  for (std::uint32_t offset = 0; offset < 4096; ++offset) {
    EXPECT_EQ(layout::swizzle_address(offset, 1), static_cast<std::uint32_t>(Swizzle<3, 4, 3>{}(offset)));
    EXPECT_EQ(layout::swizzle_address(offset, 2), static_cast<std::uint32_t>(Swizzle<2, 4, 3>{}(offset)));
    EXPECT_EQ(layout::swizzle_address(offset, 3), static_cast<std::uint32_t>(Swizzle<1, 4, 3>{}(offset)));
    EXPECT_EQ(layout::swizzle_address(offset, 0), offset);
  }
}

// A tile of CuTe's canonical GMMA layout (the atom tiled to MN x KW), taken
// 16 columns (one wgmma's k) at a time: the descriptor CuTe builds for each
// block, decoded and walked the emulator's way from the block's start, must
// address every element where CuTe's tensor puts it.
// E: the element type; a wgmma's k is 32 bytes (16 bf16, 32 e4m3).
template <class Atom, GMMA::Major Major, int MN, int KW, class E = bf16>
void expect_descriptor_walk_matches(int expected_swizzle) {
  constexpr int depth = 32 / static_cast<int>(sizeof(E));
  alignas(1024) static E buffer[MN * KW];
  const auto tile = tile_to_shape(Atom{}, make_shape(Int<MN>{}, Int<KW>{}));
  const Tensor tensor = make_tensor(make_smem_ptr(buffer), tile);
  const auto* base = reinterpret_cast<const char*>(buffer);
  for (int kb = 0; kb < KW / depth; ++kb) {
    const Tensor block = local_tile(tensor, make_shape(Int<MN>{}, Int<depth>{}), make_coord(0, kb));
    const std::uint64_t bits = quietly([&] { return GMMA::make_gmma_desc<Major>(block).desc_; });
    layout::Descriptor d = layout::decode_descriptor(bits);
    ASSERT_EQ(d.swizzle, expected_swizzle);
    ASSERT_EQ(d.base_offset, 0);
    // CuTe leaves the start address to the device: it is the block's (unswizzled) first byte.
    d.start = static_cast<std::uint32_t>(reinterpret_cast<const char*>(raw_pointer_cast(block.data())) - base);
    const bool mn_major = Major == GMMA::Major::MN;
    for (int mn = 0; mn < MN; ++mn) {
      for (int k = 0; k < depth; ++k) {
        const auto cute_offset = reinterpret_cast<const char*>(&block(mn, k)) - base;
        const std::uint32_t ours = layout::swizzle_address(
            d.start + layout::operand_offset(d, mn_major, mn, k, static_cast<int>(sizeof(E))), d.swizzle);
        ASSERT_EQ(static_cast<long>(ours), static_cast<long>(cute_offset))
            << "k block " << kb << ", element (" << mn << ", " << k << "), LBO " << d.leading_byte_offset << ", SBO "
            << d.stride_byte_offset;
      }
    }
  }
}

TEST(CuteCrossCheck, KMajorDescriptorsAddressWhatCuteLaysOut) {
  expect_descriptor_walk_matches<GMMA::Layout_K_INTER_Atom<bf16>, GMMA::Major::K, 64, 32>(0);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW32_Atom<bf16>, GMMA::Major::K, 64, 16>(3);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW64_Atom<bf16>, GMMA::Major::K, 64, 32>(2);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW128_Atom<bf16>, GMMA::Major::K, 64, 64>(1);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW128_Atom<bf16>, GMMA::Major::K, 256, 64>(1);
}

// 8-bit operands are K-major only.
TEST(CuteCrossCheck, Fp8KMajorDescriptorsAddressWhatCuteLaysOut) {
  using fp8 = cutlass::float_e4m3_t;
  expect_descriptor_walk_matches<GMMA::Layout_K_INTER_Atom<fp8>, GMMA::Major::K, 64, 64, fp8>(0);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW32_Atom<fp8>, GMMA::Major::K, 64, 32, fp8>(3);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW64_Atom<fp8>, GMMA::Major::K, 64, 64, fp8>(2);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW128_Atom<fp8>, GMMA::Major::K, 64, 128, fp8>(1);
  expect_descriptor_walk_matches<GMMA::Layout_K_SW128_Atom<fp8>, GMMA::Major::K, 256, 128, fp8>(1);
}

TEST(CuteCrossCheck, MnMajorDescriptorsAddressWhatCuteLaysOut) {
  expect_descriptor_walk_matches<GMMA::Layout_MN_INTER_Atom<bf16>, GMMA::Major::MN, 64, 32>(0);
  expect_descriptor_walk_matches<GMMA::Layout_MN_SW32_Atom<bf16>, GMMA::Major::MN, 64, 16>(3);
  expect_descriptor_walk_matches<GMMA::Layout_MN_SW64_Atom<bf16>, GMMA::Major::MN, 64, 16>(2);
  expect_descriptor_walk_matches<GMMA::Layout_MN_SW128_Atom<bf16>, GMMA::Major::MN, 64, 32>(1);
  expect_descriptor_walk_matches<GMMA::Layout_MN_SW128_Atom<bf16>, GMMA::Major::MN, 256, 16>(1);
}

// CuTe's thread-value layouts map (thread, value) to an index of the column-major M x N (or M x K) tile.
template <class Op, int N>
void expect_accumulator_layout_matches() {
  const auto c = typename MMA_Traits<Op>::CLayout{};
  for (int t = 0; t < 128; ++t) {
    for (int v = 0; v < N / 2; ++v) {
      const int index = c(t, v);
      const layout::Position p = layout::accumulator_position(t, v);
      ASSERT_EQ(p.row, index % 64) << "thread " << t << ", register " << v;
      ASSERT_EQ(p.col, index / 64) << "thread " << t << ", register " << v;
    }
  }
}

TEST(CuteCrossCheck, AccumulatorFragmentsMatchCute) {
  expect_accumulator_layout_matches<SM90_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>, 64>();
  expect_accumulator_layout_matches<SM90_64x96x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>, 96>();
  expect_accumulator_layout_matches<SM90_64x256x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>, 256>();
}

TEST(CuteCrossCheck, RegisterAFragmentsMatchCute) {
  const auto a = typename MMA_Traits<SM90_64x64x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::K>>::ALayout{};
  for (int t = 0; t < 128; ++t) {
    for (int h = 0; h < 8; ++h) {
      const int index = a(t, h);
      const layout::Position p = layout::a_fragment_position(t, h);
      ASSERT_EQ(p.row, index % 64) << "thread " << t << ", value " << h;
      ASSERT_EQ(p.col, index / 64) << "thread " << t << ", value " << h;
    }
  }
}

TEST(CuteCrossCheck, RegisterAFp8FragmentsMatchCute) {
  const auto a = GMMA::ALayout_64x32{};
  for (int t = 0; t < 128; ++t) {
    for (int v = 0; v < 16; ++v) {
      const int index = a(t, v);
      const layout::Position p = layout::a_fragment_position_k32(t, v);
      ASSERT_EQ(p.row, index % 64) << "thread " << t << ", value " << v;
      ASSERT_EQ(p.col, index / 64) << "thread " << t << ", value " << v;
    }
  }
}

// mma.sync m16n8k32 on e4m3 (sm_89+): CuTe's atom lays A out as (M, K), B as
// (N, K) and C as (M, N), each column-major over (thread, value).
TEST(CuteCrossCheck, Fp8MmaFragmentsMatchCute) {
  namespace k32 = mla::simt::sm80_layout;
  using Traits = MMA_Traits<SM89_16x8x32_F32E4M3E4M3F32_TN>;
  for (int t = 0; t < 32; ++t) {
    for (int v = 0; v < 16; ++v) {
      const int index = typename Traits::ALayout{}(t, v);
      const k32::Coord a = k32::mma_k32_a(t, v);
      ASSERT_EQ(a.row, index % 16) << "A, thread " << t << ", value " << v;
      ASSERT_EQ(a.col, index / 16) << "A, thread " << t << ", value " << v;
    }
    for (int v = 0; v < 8; ++v) {
      const int index = typename Traits::BLayout{}(t, v);
      const k32::Coord b = k32::mma_k32_b(t, v);
      ASSERT_EQ(b.col, index % 8) << "B, thread " << t << ", value " << v;
      ASSERT_EQ(b.row, index / 8) << "B, thread " << t << ", value " << v;
    }
    for (int v = 0; v < 4; ++v) {
      const int index = typename Traits::CLayout{}(t, v);
      const k32::Coord c = k32::mma_k32_c(t, v);
      ASSERT_EQ(c.row, index % 16) << "C, thread " << t << ", value " << v;
      ASSERT_EQ(c.col, index / 16) << "C, thread " << t << ", value " << v;
    }
  }
}

}  // namespace
