// What a HOPPER_FLASH launch passes besides FlashParams and the tensor maps:
// the persistent schedule. Plain C++, shared by the kernel and the launchers.
#pragma once

namespace mla::hopper_flash {

struct HopperSchedule {
  int total_tiles = 0;  // (query tile, head, key split) triples: num_work * num_heads * num_splits
  int head_group = 1;   // heads per L2 group, a divisor of num_heads
  // Zero at launch, this launch's own: each block takes tile blockIdx.x
  // first, then gridDim.x + atomicAdd(tile_counter, 1) whenever its producer
  // is ready for another, so blocks that drew light tiles take more (the
  // tiles are heaviest first). Null: block b takes b, b + gridDim.x, ...
  int* tile_counter = nullptr;
  // Nonzero: the two consumer warpgroups take turns at issuing their wgmmas
  // (hopper_kernel.cuh), so one's softmax overlaps the other's GEMMs.
  int pingpong = 0;
  // Nonzero: O goes through a staging panel per consumer in shared memory
  // and leaves it by TMA where the consumer's 64 rows lie inside their
  // sequence, by 16-byte stores otherwise (hopper_kernel.cuh); fp8 output and
  // split-KV partials never take it (tma_store_fits). The launch allocates
  // the staging panels (HopperTileConfig::shared_bytes(true)) and passes the
  // output's map.
  int tma_store = 0;
};

}  // namespace mla::hopper_flash
