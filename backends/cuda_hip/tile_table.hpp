// The tile-table mechanics both vendors' flash_config.hpp share: pick the
// first candidate tile that fits a (qk head dim, v head dim) pair, check a
// whole table, and look a pair up. Each vendor keeps its own FlashTileConfig
// and is_valid(); the calls below find it by argument-dependent lookup.
#pragma once

#include <cstddef>

#include "mla/detail/host_device.hpp"

namespace mla::gpu {

// The first of `candidates` (head dims ignored) that passes is_valid with the
// pair's head dims; when none does, a value-initialized row with those head
// dims (zero warps or waves, which is_valid rejects).
template <class Tile, std::size_t N>
MLA_HOST_DEVICE constexpr Tile first_fitting_tile(const Tile (&candidates)[N], int head_dim_qk, int head_dim_v) {
  for (Tile tile : candidates) {
    tile.head_dim_qk = head_dim_qk;
    tile.head_dim_v = head_dim_v;
    if (is_valid(tile)) return tile;
  }
  Tile none{};
  none.head_dim_qk = head_dim_qk;
  none.head_dim_v = head_dim_v;
  return none;
}

template <class Tile, std::size_t N>
MLA_HOST_DEVICE constexpr bool every_tile_is_valid(const Tile (&table)[N]) {
  for (const Tile& tile : table) {
    if (!is_valid(tile)) return false;
  }
  return true;
}

// The first row of `table` for the pair, or null.
template <class Tile, std::size_t N>
MLA_HOST_DEVICE constexpr const Tile* find_tile(const Tile (&table)[N], int head_dim_qk, int head_dim_v) {
  for (const Tile& tile : table) {
    if (tile.head_dim_qk == head_dim_qk && tile.head_dim_v == head_dim_v) return &tile;
  }
  return nullptr;
}

}  // namespace mla::gpu
