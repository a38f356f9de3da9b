// HOPPER_FLASH's host-side pieces, without running the kernel: the tile
// table, the persistent schedule (every (query tile, head) pair exactly
// once, whatever the grid), the bounds both roles compute for a tile, and
// the tensor maps the launcher builds (checked by the emulator's
// make_tensor_map, which validates a spec as the GPU build's does).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/hopper_kernel.cuh"
#include "cuda/hopper_launch.hpp"
#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"
#include "simt/emulator.hpp"
#include "simt/sm90_layout.hpp"

namespace mla::hopper_flash {
namespace {

TEST(HopperTiles, EveryShapeFitsTheSm90Budgets) {
  ASSERT_EQ(std::size(hopper_tile_configs), 3u);
  for (const HopperTileConfig& c : hopper_tile_configs) {
    EXPECT_TRUE(is_valid(c)) << c.head_dim_qk << "/" << c.head_dim_v;
    EXPECT_LE(c.shared_bytes(), max_shared_bytes);
    EXPECT_EQ(c.stage_bytes(), static_cast<std::size_t>(c.block_cols) * (c.head_dim_qk + c.head_dim_v) * 2);
    EXPECT_EQ(c.barrier_offset() % 8, 0u);  // mbarriers are 8-byte objects
    EXPECT_EQ(c.stage_offset(1) % swizzle_atom_bytes, 0u);
    EXPECT_EQ((c.stage_offset(0) + c.k_bytes()) % swizzle_atom_bytes, 0u);
    // The TMA-store epilogue's staging panels: after the tile slot, on the
    // swizzle's 1024-byte boundary, within the budget.
    EXPECT_LE(c.shared_bytes(true), max_shared_bytes);
    EXPECT_EQ(c.staging_offset() % swizzle_atom_bytes, 0u);
    EXPECT_GE(c.staging_offset(), c.tile_slot_offset() + tile_slot_bytes);
    EXPECT_EQ(c.shared_bytes(true), c.staging_offset() + 2 * 64 * 128 + swizzle_atom_bytes);
  }
  EXPECT_EQ(find_hopper_tile_config(192, 128)->block_cols, 128);
  EXPECT_EQ(find_hopper_tile_config(128, 128)->block_cols, 128);
  EXPECT_EQ(find_hopper_tile_config(256, 256)->block_cols, 64);
  EXPECT_EQ(find_hopper_tile_config(192, 192), nullptr);
  // setmaxnreg: the three warpgroups fit the register file.
  EXPECT_LE(warpgroup_threads * (producer_registers + consumer_warpgroups * consumer_registers), 65536);
}

// float8_e4m3 inputs: the same keys per stage in half the bytes, every
// panel on its 64-byte swizzle's 512-byte repeat, and the chooser's answer
// on 9.0 sized as launched.
TEST(HopperTiles, E4m3TilesHalveTheStages) {
  for (const HopperTileConfig& tile : hopper_tile_configs) {
    const HopperTileConfig c = tile.with_input_bytes(1);
    SCOPED_TRACE(std::to_string(c.head_dim_qk) + "/" + std::to_string(c.head_dim_v));
    EXPECT_TRUE(is_valid(c));
    EXPECT_EQ(c.stage_bytes(), static_cast<std::size_t>(c.block_cols) * (c.head_dim_qk + c.head_dim_v));
    EXPECT_EQ(c.input_row_bytes(), 64);
    EXPECT_EQ(c.input_atom_bytes(), 512);
    EXPECT_EQ(c.q_panel_bytes() % 512, 0u);
    EXPECT_EQ(c.kv_panel_bytes() % 512, 0u);
    EXPECT_EQ(c.vt_panel_bytes() % 512, 0u);
    EXPECT_EQ(c.block_cols / panel_elements * c.vt_panel_bytes(), c.v_bytes());
    EXPECT_LT(c.shared_bytes(true), tile.shared_bytes(true));
    DeviceCapability h200;
    h200.vendor = Vendor::nvidia;
    h200.major = 9;
    h200.minor = 0;
    h200.shared_memory_per_block = max_shared_bytes;
    const gpu::KernelChoice choice = choose_kernel({DType::float8_e4m3, {c.head_dim_qk - 64, 64, c.head_dim_v}, &h200});
    EXPECT_TRUE(choice.supported()) << choice.refusal;
    EXPECT_EQ(choice.shared_bytes, c.shared_bytes());
  }
}

// P's e4m3 A fragment (pack_p_e4m3) against the hardware layouts: the byte
// that A position (row, slot) of a 32-key step receives is S's accumulator of
// that row and of key e4m3_slot_key(slot), for every thread of the
// warpgroup; and e4m3_slot_key permutes the 32 keys.
TEST(HopperE4m3, PFragmentTakesTheSlotKeysAccumulators) {
  std::set<int> keys;
  for (int slot = 0; slot < 32; ++slot) keys.insert(e4m3_slot_key(slot));
  EXPECT_EQ(keys.size(), 32u);
  EXPECT_EQ(*keys.begin(), 0);
  EXPECT_EQ(*keys.rbegin(), 31);
  // One 32-key step: 16 accumulators per thread, valued 1..16 (exact in e4m3).
  float s[16];
  for (int j = 0; j < 16; ++j) s[j] = static_cast<float>(j + 1);
  std::uint32_t frag[1][4];
  detail::pack_p_e4m3<32>(frag, s);
  for (int thread = 0; thread < 128; ++thread) {
    for (int h = 0; h < 16; ++h) {
      const auto byte = static_cast<std::uint8_t>(frag[0][h / 4] >> (8 * (h % 4)));
      const int j = static_cast<int>(numeric::fp8_e4m3_to_float(byte)) - 1;
      ASSERT_TRUE(j >= 0 && j < 16) << byte;
      const simt::sm90_layout::Position a = simt::sm90_layout::a_fragment_position_k32(thread, h);
      const simt::sm90_layout::Position acc = simt::sm90_layout::accumulator_position(thread, j);
      EXPECT_EQ(acc.row, a.row) << "thread " << thread << " value " << h;
      EXPECT_EQ(acc.col, e4m3_slot_key(a.col)) << "thread " << thread << " value " << h;
    }
  }
}

// The transposed copy of V (transpose_v_e4m3 under the emulator) against its
// definition: sequence s's key 32g + e4m3_slot_key(slot) at column
// vt_start(s) + 32g + slot of every dv row of its head, zero in every other
// column; lengths 0, 1, 31, 33 and 70 with padded rows of V.
TEST(HopperE4m3, TransposedVHoldsEveryKeyOnceAndZerosElsewhere) {
  constexpr int dv = 128;
  constexpr int heads = 2;
  constexpr std::int64_t row_stride = heads * dv + 16;
  const std::vector<std::int32_t> cu_k = {0, 0, 1, 32, 65, 135};
  const int batch = static_cast<int>(cu_k.size()) - 1;
  const std::int64_t k_tokens = cu_k.back();
  std::vector<std::uint8_t> v(static_cast<std::size_t>(k_tokens * row_stride));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(1 + (i * 37) % 120);
  gpu::FlashParams p;
  p.v = v.data();
  p.v_row_stride = row_stride;
  p.v_head_stride = dv;
  p.k_tokens = k_tokens;
  p.num_heads = heads;
  p.batch_size = batch;
  p.cu_seqlens_k = cu_k.data();
  const TransposeGrid grid = transpose_grid(p, dv);
  ASSERT_EQ(grid.columns, vt_columns(k_tokens, batch));
  ASSERT_EQ(grid.columns % vt_block_columns, 0);
  std::vector<std::uint8_t> vt(transposed_v_bytes(p, dv), 0xff);
  simt::LaunchConfig config;
  config.kernel = "transpose_v_e4m3<128>";
  config.grid.x = grid.blocks_x;
  config.grid.y = grid.heads;
  config.block.x = grid.threads;
  unsigned char* out = vt.data();
  simt::launch(config, [&] { transpose_v_e4m3<dv>(p, out, grid.columns); });
  std::vector<std::uint8_t> expected(vt.size(), 0);
  for (int seq = 0; seq < batch; ++seq) {
    const int length = cu_k[seq + 1] - cu_k[seq];
    for (int r = 0; r < (length + 31) / 32 * 32; ++r) {
      const int key = r / 32 * 32 + e4m3_slot_key(r % 32);
      if (key >= length) continue;
      for (int head = 0; head < heads; ++head) {
        for (int d = 0; d < dv; ++d) {
          const std::int64_t column = vt_start(cu_k[seq], seq) + r;
          expected[static_cast<std::size_t>((head * dv + d) * grid.columns + column)] =
              v[static_cast<std::size_t>((cu_k[seq] + key) * row_stride + head * dv + d)];
        }
      }
    }
  }
  EXPECT_EQ(vt, expected);
}

TEST(HopperSchedule, HeadGroupsDivideTheHeads) {
  EXPECT_EQ(head_group(128), 16);
  EXPECT_EQ(head_group(16), 16);
  EXPECT_EQ(head_group(3), 3);
  EXPECT_EQ(head_group(1), 1);
  EXPECT_EQ(head_group(17), 1);
  EXPECT_EQ(head_group(24), 12);
  EXPECT_EQ(head_group(128, 5), 4);
  EXPECT_EQ(head_group(24, 5), 4);
}

TEST(HopperSchedule, HeadGroupsAreSizedFromTheL2) {
  constexpr std::size_t h200_l2 = 60u << 20;
  // 192/128: 640 bytes of K and V per key and head; half of 60 MiB is 30 MiB.
  EXPECT_EQ(l2_max_head_group(h200_l2, 8192, 192, 128), 6);  // 5 MiB per head
  EXPECT_EQ(l2_max_head_group(h200_l2, 16384, 192, 128), 3);
  EXPECT_EQ(l2_max_head_group(h200_l2, 1 << 20, 192, 128), 1);  // never 0
  EXPECT_EQ(l2_max_head_group(h200_l2, 2048, 192, 128), default_max_head_group);
  EXPECT_EQ(l2_max_head_group(0, 8192, 192, 128), default_max_head_group);  // unknown L2
  EXPECT_EQ(l2_max_head_group(h200_l2, 0, 192, 128), default_max_head_group);
  // What a launch at 8k then uses for DeepSeek-V3's 128 heads: a divisor.
  EXPECT_EQ(head_group(128, l2_max_head_group(h200_l2, 8192, 192, 128)), 4);
}

TEST(HopperSchedule, EveryTileOfEveryHeadAndKeyRangeExactlyOnce) {
  const HopperTileConfig cfg = *find_hopper_tile_config(192, 128);
  for (const auto& [work, heads] : std::vector<std::pair<int, int>>{{1, 1}, {7, 3}, {5, 128}, {33, 24}, {2, 17}}) {
    for (const int splits : {1, 3}) {
      gpu::FlashParams params;
      params.num_work = work;
      params.num_heads = heads;
      params.num_splits = splits;
      for (int sms : {1, 3, 132}) {
        for (int max_group : {1, 4, default_max_head_group}) {
          const PersistentGrid grid = persistent_grid(params, cfg, sms, max_group, "test");
          const int tiles = work * heads * splits;
          ASSERT_EQ(grid.schedule.total_tiles, tiles);
          EXPECT_EQ(grid.blocks, std::min(tiles, sms));
          std::set<std::tuple<int, int, int>> seen;
          for (int block = 0; block < grid.blocks; ++block) {
            for (int t = block; t < grid.schedule.total_tiles; t += grid.blocks) {
              const detail::TileAssignment a = detail::assign(t, work, grid.schedule.head_group, splits);
              ASSERT_GE(a.work, 0);
              ASSERT_LT(a.work, work);
              ASSERT_GE(a.head, 0);
              ASSERT_LT(a.head, heads);
              ASSERT_GE(a.split, 0);
              ASSERT_LT(a.split, splits);
              // The key ranges of one (work item, head) are neighbours.
              EXPECT_EQ(a.split, t % splits);
              EXPECT_TRUE(seen.insert({a.work, a.head, a.split}).second) << "tile " << t << " repeats";
            }
          }
          EXPECT_EQ(seen.size(), static_cast<std::size_t>(tiles));
        }
      }
    }
  }
  gpu::FlashParams none;
  EXPECT_EQ(persistent_grid(none, cfg, 132, default_max_head_group, "test").blocks, 0);
}

TEST(HopperSchedule, BoundsOfCausalTilesSkipFullyMaskedKeys) {
  // 300 queries after 200 cached keys: 500 keys, bottom-right causal.
  const std::vector<std::int32_t> cu_q = {0, 300}, cu_k = {0, 500};
  gpu::FlashParams p;
  p.cu_seqlens_q = cu_q.data();
  p.cu_seqlens_k = cu_k.data();
  p.tiles_per_seq = 3;
  p.num_work = 3;
  // Without a work list index 0 is the last (heaviest) query tile.
  const detail::TileBounds last = detail::bounds<true>(p, 0, 0, 128);
  EXPECT_FALSE(last.empty);
  EXPECT_EQ(last.row0, 256);
  EXPECT_EQ(last.key_tiles, 4);     // keys 0..499
  EXPECT_EQ(last.last_tile, 3);     // run from the last key tile down
  EXPECT_EQ(last.masked_tiles, 1);  // row 256 sees keys 0..456: tiles 0..2 need no mask
  const detail::TileBounds first = detail::bounds<true>(p, 2, 0, 128);
  EXPECT_EQ(first.row0, 0);
  EXPECT_EQ(first.key_tiles, 3);  // row 127 sees keys 0..327: the tile of keys 384.. is never loaded
  EXPECT_EQ(first.masked_tiles, 2);
  // Split-KV into 3 ranges of the last query tile's 4 key tiles: [0, 2), [2, 4), [4, 4).
  p.num_splits = 3;
  const detail::TileBounds low = detail::bounds<true>(p, 0, 0, 128);
  EXPECT_EQ(low.key_tiles, 2);
  EXPECT_EQ(low.last_tile, 1);
  EXPECT_EQ(low.masked_tiles, 0);
  const detail::TileBounds high = detail::bounds<true>(p, 0, 1, 128);
  EXPECT_EQ(high.key_tiles, 2);
  EXPECT_EQ(high.last_tile, 3);
  EXPECT_EQ(high.masked_tiles, 1);  // tile 3 masked, tile 2 not
  const detail::TileBounds none = detail::bounds<true>(p, 0, 2, 128);
  EXPECT_FALSE(none.empty);  // still writes its partial: O = 0, LSE = -inf
  EXPECT_EQ(none.key_tiles, 0);
  EXPECT_EQ(none.masked_tiles, 0);
  p.num_splits = 1;
  p.tiles_per_seq = 4;  // a tile past the sequence's end: no loads, no output
  EXPECT_TRUE(detail::bounds<true>(p, 0, 0, 128).empty);
}

// A map of a [tokens, heads, dim] tensor of 16-bit elements as the
// launcher builds them: rank 3 (dim innermost), boxes of 64 x `box_rows` x
// 1 head, 128-byte swizzled.
struct TokenHeadMap {
  const void* base;
  std::uint64_t dim, tokens, heads, row_bytes, head_bytes;
  std::uint32_t box_rows;
};

void expect_token_head_map(const cuda_flash::sm90::TensorMap& map, const TokenHeadMap& want) {
  EXPECT_EQ(map.base, want.base);
  EXPECT_EQ(map.rank, 3);
  EXPECT_EQ(map.dims[0], want.dim);
  EXPECT_EQ(map.dims[1], want.tokens);
  EXPECT_EQ(map.dims[2], want.heads);
  EXPECT_EQ(map.strides_bytes[0], want.row_bytes);
  EXPECT_EQ(map.strides_bytes[1], want.head_bytes);
  EXPECT_EQ(map.box[0], 64u);
  EXPECT_EQ(map.box[1], want.box_rows);
  EXPECT_EQ(map.box[2], 1u);
  EXPECT_EQ(map.swizzle, static_cast<int>(cuda_flash::sm90::Swizzle::bytes128));
}

TEST(HopperMaps, ThreeDimensionalBoxesOf64ElementsSwizzled128) {
  std::vector<std::uint16_t> q(40 * 3 * 200), k(50 * 3 * 192), v(50 * 3 * 128);
  gpu::FlashParams p;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.q_tokens = 40;
  p.k_tokens = 50;
  p.num_heads = 3;
  p.q_row_stride = 3 * 200;  // padded rows
  p.q_head_stride = 200;
  p.k_row_stride = 3 * 192;
  p.k_head_stride = 192;
  p.v_row_stride = 3 * 128;
  p.v_head_stride = 128;
  const HopperTileConfig cfg = *find_hopper_tile_config(192, 128);
  const HopperMaps maps = make_hopper_maps(p, cfg);
  expect_token_head_map(maps.q, {q.data(), 192, 40, 3, 1200, 400, 128});
  EXPECT_EQ(maps.k.dims[1], 50u);
  EXPECT_EQ(maps.k.box[1], 128u);
  EXPECT_EQ(maps.v.dims[0], 128u);
  EXPECT_EQ(maps.v.strides_bytes[0], 768u);

  // One token and one head: their strides are free, the maps take dense ones.
  p.q_tokens = 1;
  p.k_tokens = 1;
  p.num_heads = 1;
  p.q_row_stride = 3;
  p.q_head_stride = 0;
  const HopperMaps single = make_hopper_maps(p, cfg);
  EXPECT_EQ(single.q.strides_bytes[0], 384u);
  EXPECT_EQ(single.q.strides_bytes[1], 384u);
  // No keys at all: k and v still get valid maps, over q's memory (no box is loaded).
  p.k_tokens = 0;
  p.k = nullptr;
  p.v = nullptr;
  const HopperMaps no_keys = make_hopper_maps(p, cfg);
  EXPECT_EQ(no_keys.k.base, q.data());
  // A stride TMA cannot take is refused with the field named.
  p.k_tokens = 50;
  p.k = k.data();
  p.v = v.data();
  p.num_heads = 3;
  p.q_tokens = 40;
  p.q_row_stride = 3 * 200;
  p.q_head_stride = 201;  // 402 bytes: not a multiple of 16
  try {
    (void)make_hopper_maps(p, cfg);
    ADD_FAILURE() << "a head stride of 402 bytes was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("HOPPER_FLASH: the tensor map of q: make_tensor_map: strides_bytes[1]", 0), 0u) << message;
  }
}

// The output's map (TMA-store epilogue): boxes of 64 x 64 rows, and only for
// outputs a map can describe; the rest are stored from registers.
TEST(HopperMaps, OutputMapOnlyWhereTheTmaStoreFits) {
  std::vector<std::uint16_t> q(40 * 3 * 192), out(40 * 3 * 136 + 8);
  gpu::FlashParams p;
  p.q = q.data();
  p.q_tokens = 40;
  p.num_heads = 3;
  p.q_row_stride = 3 * 192;
  p.q_head_stride = 192;
  p.out = out.data();
  p.out_row_stride = 3 * 136;  // padded rows
  p.out_head_stride = 136;
  const HopperTileConfig cfg = *find_hopper_tile_config(192, 128);
  ASSERT_TRUE(tma_store_fits(p, cfg));
  const HopperMaps maps = make_hopper_maps(p, cfg, true);
  expect_token_head_map(maps.o, {out.data(), 128, 40, 3, 816, 272, 64});
  // Without it, o is q's map and never stored to.
  EXPECT_EQ(make_hopper_maps(p, cfg).o.base, q.data());

  gpu::FlashParams fp8 = p;
  fp8.out_fp8 = true;
  EXPECT_FALSE(tma_store_fits(fp8, cfg));
  gpu::FlashParams split = p;
  split.num_splits = 2;
  EXPECT_FALSE(tma_store_fits(split, cfg));
  gpu::FlashParams odd_head = p;
  odd_head.out_head_stride = 129;  // 258 bytes
  EXPECT_FALSE(tma_store_fits(odd_head, cfg));
  odd_head.num_heads = 1;  // a lone head's stride is free
  EXPECT_TRUE(tma_store_fits(odd_head, cfg));
  gpu::FlashParams unaligned = p;
  unaligned.out = out.data() + 1;
  EXPECT_FALSE(tma_store_fits(unaligned, cfg));
  gpu::FlashParams no_rows = p;
  no_rows.q_tokens = 0;
  EXPECT_FALSE(tma_store_fits(no_rows, cfg));
}

// MLA_HOPPER_TMA_STORE picks the epilogue; the schedule takes the TMA store
// only where the output fits it.
TEST(HopperSchedule, TmaStoreSettingAndFit) {
  const HopperTileConfig cfg = *find_hopper_tile_config(192, 128);
  std::vector<std::uint16_t> out(256 * 2 * 128);
  gpu::FlashParams p;
  p.num_work = 2;
  p.num_heads = 2;
  p.num_splits = 1;
  p.q_tokens = 256;
  p.out = out.data();
  p.out_row_stride = 2 * 128;
  p.out_head_stride = 128;
  ASSERT_EQ(unsetenv("MLA_HOPPER_TMA_STORE"), 0);
  EXPECT_EQ(persistent_grid(p, cfg, 4, 16, "k").schedule.tma_store, default_tma_store ? 1 : 0);
  ASSERT_EQ(setenv("MLA_HOPPER_TMA_STORE", "1", 1), 0);
  EXPECT_EQ(persistent_grid(p, cfg, 4, 16, "k").schedule.tma_store, 1);
  p.out_fp8 = true;
  EXPECT_EQ(persistent_grid(p, cfg, 4, 16, "k").schedule.tma_store, 0);
  p.out_fp8 = false;
  ASSERT_EQ(setenv("MLA_HOPPER_TMA_STORE", "0", 1), 0);
  EXPECT_EQ(persistent_grid(p, cfg, 4, 16, "k").schedule.tma_store, 0);
  ASSERT_EQ(setenv("MLA_HOPPER_TMA_STORE", "yes", 1), 0);
  EXPECT_THROW(persistent_grid(p, cfg, 4, 16, "k"), Error);
  ASSERT_EQ(unsetenv("MLA_HOPPER_TMA_STORE"), 0);
}

}  // namespace
}  // namespace mla::hopper_flash
