// What the GPU flash backends are asked, and how each backend's one chooser
// (cuda/kernel_choice.hpp, hip/kernel_choice.hpp; the emulator reuses them)
// answers: whether a kernel serves the request, why not, which kernel tile,
// and the shared memory (LDS) one block of it takes. Pure functions over the
// constexpr tile tables, so the entry's validate(), the backend's planning
// (its work lists follow the tile) and every launch ask the same question
// and cannot disagree. Plain C++: compiled in every build.
#pragma once

#include <cstddef>
#include <string>

#include "cuda_hip/flash_dims.hpp"
#include "mla/queue.hpp"
#include "mla/tensor.hpp"

namespace mla::gpu {

struct KernelRequest {
  DType dtype = DType::bfloat16;
  MlaDims dims = deepseek_dims;
  // The device the kernel would run on; null asks about the kernel alone
  // (the backend's constructor and planning, before a queue is known).
  const DeviceCapability* device = nullptr;
};

// Which kernel instantiation runs: its head dims and tile.
struct KernelTile {
  int head_dim_qk = 0;
  int head_dim_v = 0;
  int block_rows = 0;  // query rows per block (Br): the work-list tile height
  int block_cols = 0;  // keys per iteration (Bc): the work-list tile width
};

struct KernelChoice {
  // Empty when a kernel serves the request; otherwise why not, worded to
  // follow the backend's name ("has no kernel for ...", "needs an NVIDIA GPU ...").
  std::string refusal;
  KernelTile tile;
  std::size_t shared_bytes = 0;  // shared memory (LDS) one block uses

  bool supported() const { return refusal.empty(); }
};

using KernelChooser = KernelChoice (*)(const KernelRequest& request);

// What a vendor's tile table says of the request's head dims: the row's
// tile and the shared memory (LDS) a block of it takes; no row, no kernel.
struct TableRow {
  bool found = false;
  KernelTile tile;
  std::size_t shared_bytes = 0;
};

// The chooser both vendors share, asking in this order: the dtype (16-bit,
// or also float8_e4m3 inputs when the kernel has `e4m3_inputs`), the table
// row, then on a given device the vendor's own refusal (`device_refusal`,
// empty when it runs there) and the shared memory (`memory_name`, "shared
// memory" or "LDS"). Only a real device's shared memory is compared: a
// simulated platform's (MLA_PLATFORM) is a default, not the part's opt-in
// limit, and a device that reports none is not refused for it.
template <class DeviceRefusal>
KernelChoice choose_from_table(const KernelRequest& request, const TableRow& row, DeviceRefusal device_refusal,
                               const char* memory_name, bool e4m3_inputs = false) {
  KernelChoice choice;
  if (!is_flash_dtype(request.dtype, e4m3_inputs)) {
    choice.refusal = std::string(e4m3_inputs ? "supports float16, bfloat16 and float8_e4m3 inputs; got "
                                             : "supports float16 and bfloat16; got ") +
                     std::string(dtype_name(request.dtype));
    return choice;
  }
  if (!row.found) {
    choice.refusal = "has no kernel for " + to_string(request.dims) + " (qk head dim " +
                     std::to_string(request.dims.qk_head_dim()) + ", v head dim " +
                     std::to_string(request.dims.v_head_dim) + ")";
    return choice;
  }
  choice.tile = row.tile;
  choice.shared_bytes = row.shared_bytes;
  if (request.device == nullptr) return choice;
  const DeviceCapability& device = *request.device;
  choice.refusal = device_refusal(device);
  const std::size_t limit = device.shared_memory_per_block;
  if (choice.supported() && !device.simulated && limit != 0 && choice.shared_bytes > limit) {
    choice.refusal = "needs " + std::to_string(choice.shared_bytes) + " bytes of " + memory_name +
                     " per block for qk head dim " + std::to_string(row.tile.head_dim_qk) + " and v head dim " +
                     std::to_string(row.tile.head_dim_v) + "; " + device.describe() + " allows " +
                     std::to_string(limit);
  }
  return choice;
}

}  // namespace mla::gpu
