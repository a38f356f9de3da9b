// What a HOPPER_FLASH launch passes besides FlashParams and the tensor maps:
// the persistent schedule. Plain C++, shared by the kernel and the launchers.
#pragma once

namespace mla::hopper_flash {

struct HopperSchedule {
  int total_tiles = 0;  // (query tile, head) pairs: num_work * num_heads
  int head_group = 1;   // heads per L2 group, a divisor of num_heads
};

}  // namespace mla::hopper_flash
