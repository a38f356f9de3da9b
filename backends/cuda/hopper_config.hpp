// HOPPER_FLASH as every build knows it, top to bottom: the block's shape and
// shared-memory layout with the tile table (one row per (qk head dim, v head
// dim) of cuda_hip/flash_shapes.def), the L2 head groups, the devices it runs
// on with the kernel chooser over the table, and the persistent schedule the
// kernel takes besides FlashParams. Plain C++ with no vendor header: the
// kernel (hopper_kernel.cuh), its launch recipe (hopper_launch.hpp), the
// backend's entry (compiled in every build), the emulator and the host tests
// read the same numbers.
//
// A block is three warpgroups: one producer (TMA) and two consumers of 64
// query rows each, so 128 query rows per block. Every tile in shared memory
// is cut into panels of 64 columns (128 bytes of bf16/fp16, the span of the
// 128-byte swizzle): a panel of R rows is R x 128 bytes, swizzled as TMA
// writes it and as the wgmma descriptors read it, and starts on a 1024-byte
// boundary (the swizzle pattern repeats every 8 rows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda_hip/kernel_choice.hpp"
#include "cuda_hip/tile_table.hpp"
#include "mla/detail/host_device.hpp"
#include "mla/queue.hpp"

namespace mla::hopper_flash {

inline constexpr int warpgroup_threads = 128;
inline constexpr int consumer_warpgroups = 2;
inline constexpr int block_threads = (1 + consumer_warpgroups) * warpgroup_threads;
inline constexpr int consumer_threads = consumer_warpgroups * warpgroup_threads;
inline constexpr int rows_per_consumer = 64;  // wgmma m64
inline constexpr int block_rows = consumer_warpgroups * rows_per_consumer;
inline constexpr int panel_elements = 64;  // 128 bytes of a 16-bit type
inline constexpr int panel_row_bytes = 128;
inline constexpr int swizzle_atom_bytes = 1024;  // 8 rows of 128 bytes
// setmaxnreg: the producer gives registers back, the consumers take them
// (128 x 24 + 256 x 240 = 64512 of the SM's 65536).
inline constexpr int producer_registers = 24;
inline constexpr int consumer_registers = 240;
// sm_90's opt-in shared memory per block (227 KiB).
inline constexpr std::size_t max_shared_bytes = 227 * 1024;
// Accumulator and operand registers a consumer thread may hold (O, S and one
// P fragment); the rest of consumer_registers is addresses and softmax state.
inline constexpr int fragment_register_budget = 184;
// Ten mbarriers: Q full / empty, and per stage K full / empty and V full /
// empty. K and V have barriers of their own so that a stage's K is given back
// as soon as S = Q K^T has read it, a whole P V earlier than its V: the next
// K then loads while the current tile's softmax and P V run.
inline constexpr int stages = 2;
inline constexpr std::size_t barrier_bytes = 8 * (2 + 4 * stages);
// After the barriers: the tile the producer hands to the consumers with each
// Q (an int, -1 when there is none left), padded to 8 bytes.
inline constexpr std::size_t tile_slot_bytes = 8;
// The TMA-store epilogue (HopperSchedule::tma_store) stages O through one
// panel per consumer: 64 rows x 64 columns, 128-byte swizzled as the output
// tensor map's boxes are, written and stored once per 64 columns of dv.
inline constexpr std::size_t staging_panel_bytes = static_cast<std::size_t>(rows_per_consumer) * panel_row_bytes;
inline constexpr std::size_t staging_bytes = consumer_warpgroups * staging_panel_bytes;

struct HopperTileConfig {
  int head_dim_qk;
  int head_dim_v;
  int block_cols;  // keys per pipeline stage (the N of S = Q K^T)
  // Bytes of a q, k or v element: 2 (bf16, fp16) or 1 (float8_e4m3). An e4m3
  // panel is 64 elements of 64 bytes, 64-byte swizzled (192 dims are three
  // of them; FlashAttention-3 picks the same swizzle there), and V is held
  // transposed: panels of 64 keys, one row per dv column (8-bit wgmma
  // operands are K-major only), from the launch's transposed copy of V.
  int input_bytes = 2;

  MLA_HOST_DEVICE constexpr int qk_panels() const { return head_dim_qk / panel_elements; }
  MLA_HOST_DEVICE constexpr int v_panels() const { return head_dim_v / panel_elements; }
  // A panel row of q, k or v: 128 bytes (128-byte swizzle) or, for e4m3, 64 (64-byte swizzle).
  MLA_HOST_DEVICE constexpr int input_row_bytes() const { return panel_elements * input_bytes; }
  // The swizzle repeat of an input panel: 8 rows, the stride byte offset of its descriptors.
  MLA_HOST_DEVICE constexpr int input_atom_bytes() const { return 8 * input_row_bytes(); }
  MLA_HOST_DEVICE constexpr std::size_t q_panel_bytes() const {
    return static_cast<std::size_t>(block_rows) * input_row_bytes();
  }
  MLA_HOST_DEVICE constexpr std::size_t kv_panel_bytes() const {
    return static_cast<std::size_t>(block_cols) * input_row_bytes();
  }
  // e4m3: a panel of V^T, 64 keys of each of the dv rows.
  MLA_HOST_DEVICE constexpr std::size_t vt_panel_bytes() const {
    return static_cast<std::size_t>(head_dim_v) * input_row_bytes();
  }
  MLA_HOST_DEVICE constexpr std::size_t q_bytes() const { return qk_panels() * q_panel_bytes(); }
  MLA_HOST_DEVICE constexpr std::size_t k_bytes() const { return qk_panels() * kv_panel_bytes(); }
  // v_panels() panels of block_cols rows, or block_cols / 64 panels of V^T: the same bytes.
  MLA_HOST_DEVICE constexpr std::size_t v_bytes() const { return v_panels() * kv_panel_bytes(); }
  // This tile with inputs of `bytes` bytes: the same keys per stage, smaller stages.
  MLA_HOST_DEVICE constexpr HopperTileConfig with_input_bytes(int bytes) const {
    return {head_dim_qk, head_dim_v, block_cols, bytes};
  }
  // Bytes of one stage (its K, then its V); k_bytes() and v_bytes() are the
  // expect_tx of its K and V full barriers.
  MLA_HOST_DEVICE constexpr std::size_t stage_bytes() const { return k_bytes() + v_bytes(); }
  // Layout from the 1024-aligned base: [Q][stage 0: K, V][stage 1: K, V][barriers][tile slot]
  // and, with the TMA-store epilogue only, [staging] on the next 1024-byte boundary.
  MLA_HOST_DEVICE constexpr std::size_t stage_offset(int stage) const { return q_bytes() + stage * stage_bytes(); }
  MLA_HOST_DEVICE constexpr std::size_t barrier_offset() const { return stage_offset(stages); }
  MLA_HOST_DEVICE constexpr std::size_t tile_slot_offset() const { return barrier_offset() + barrier_bytes; }
  MLA_HOST_DEVICE constexpr std::size_t staging_offset() const {
    return (tile_slot_offset() + tile_slot_bytes + swizzle_atom_bytes - 1) / swizzle_atom_bytes * swizzle_atom_bytes;
  }
  // The dynamic allocation: the layout plus the slack to align its base;
  // `staged`: with the staging panels.
  MLA_HOST_DEVICE constexpr std::size_t shared_bytes(bool staged = false) const {
    return (staged ? staging_offset() + staging_bytes : tile_slot_offset() + tile_slot_bytes) + swizzle_atom_bytes;
  }
  MLA_HOST_DEVICE constexpr int fragment_registers() const { return head_dim_v / 2 + block_cols / 2 + 4; }
};

MLA_HOST_DEVICE constexpr bool is_wgmma_n(int n) { return n == 64 || n == 96 || n == 128 || n == 192 || n == 256; }

MLA_HOST_DEVICE constexpr bool is_valid(const HopperTileConfig& c) {
  if (c.block_cols <= 0) return false;
  // Whole panels; S = Q K^T and O += P V are single wgmma shapes (N = keys, N = dv);
  // P V takes its keys in k-steps of 16; a TMA box has at most 256 rows.
  const bool panels = c.head_dim_qk % panel_elements == 0 && c.head_dim_v % panel_elements == 0;
  const bool shapes = is_wgmma_n(c.block_cols) && is_wgmma_n(c.head_dim_v) && c.block_cols % 16 == 0;
  const bool boxes = c.block_cols <= 256 && block_rows <= 256;
  // Both epilogues fit: the TMA store's staging never changes the tile.
  const bool fits = c.shared_bytes(true) <= max_shared_bytes && c.fragment_registers() <= fragment_register_budget;
  // e4m3: P V takes its keys in k-steps of 32, and V^T comes in panels of 64 keys.
  const bool e4m3 = c.input_bytes == 2 || (c.input_bytes == 1 && c.block_cols % panel_elements == 0);
  return panels && shapes && boxes && fits && e4m3;
}

// Largest key tile first: 128 keys (wgmma m64n128k16 for S) where O, S and
// the stages fit; 256/256 drops to 64 keys (O alone is 128 registers).
inline constexpr HopperTileConfig tile_candidates[] = {{0, 0, 128}, {0, 0, 64}};

inline constexpr HopperTileConfig hopper_tile_configs[] = {
#define MLA_FLASH_SHAPE(nope, rope, v) gpu::first_fitting_tile(tile_candidates, (nope) + (rope), (v)),
#include "cuda_hip/flash_shapes.def"
#undef MLA_FLASH_SHAPE
};

static_assert(gpu::every_tile_is_valid(hopper_tile_configs),
              "a shape of cuda_hip/flash_shapes.def has no HOPPER_FLASH tile that fits");

constexpr bool every_tile_takes_e4m3() {
  for (const HopperTileConfig& tile : hopper_tile_configs) {
    if (!is_valid(tile.with_input_bytes(1))) return false;
  }
  return true;
}

static_assert(every_tile_takes_e4m3(), "a HOPPER_FLASH tile does not fit float8_e4m3 inputs");

constexpr const HopperTileConfig* find_hopper_tile_config(int head_dim_qk, int head_dim_v) {
  return gpu::find_tile(hopper_tile_configs, head_dim_qk, head_dim_v);
}

template <int HeadDimQk, int HeadDimV>
struct HopperTile {
  static_assert(find_hopper_tile_config(HeadDimQk, HeadDimV) != nullptr, "no tile configuration for these head dims");
  static constexpr HopperTileConfig value = *find_hopper_tile_config(HeadDimQk, HeadDimV);
};

// --- float8_e4m3 inputs: V transposed, its keys in P's order ---

// P's A fragment of a 32-key step (wgmma m64k32 from registers, the
// mma.m16n8k32 layout per warp) wants four consecutive keys per register;
// S's accumulators give a thread keys 8j + 2t and 8j + 2t + 1 (t = lane % 4).
// Rather than move bytes between lanes, P takes S's accumulators as they lie
// and V^T's key columns are permuted to match: A position 4t + i of each 16
// (i = 0..3) holds key 2t, 2t + 1, 2t + 8, 2t + 9 of those 16. The key that
// `slot` (0..31) of a 32-key step stands for:
MLA_HOST_DEVICE constexpr int e4m3_slot_key(int slot) {
  const int t = (slot % 16) / 4;
  const int i = slot % 4;
  return (slot / 16) * 16 + 2 * t + (i % 2) + 8 * (i / 2);
}

// The launch's transposed copy of V: [head][dv][column] bytes. Sequence s's
// keys start at column cu_seqlens_k[s] + vt_sequence_pad * s, in groups of 32
// from that start, each group's keys in e4m3_slot_key order; columns of no
// key (a group's tail past the sequence's end, the gap before the next) hold
// zero, so a key tile's box reads no byte that could be NaN where P is 0.
inline constexpr int vt_sequence_pad = 32;

MLA_HOST_DEVICE constexpr std::int64_t vt_start(std::int64_t k_start, int seq) {
  return k_start + static_cast<std::int64_t>(vt_sequence_pad) * seq;
}

// Columns the transpose writes per block (one 16-byte store per dv row).
inline constexpr int vt_block_columns = 16;

// Columns of the copy: every sequence's keys and pads, rounded to 16 bytes (a
// tensor map's row stride, and whole blocks of the transpose); at least 16.
MLA_HOST_DEVICE constexpr std::int64_t vt_columns(std::int64_t k_tokens, int batch) {
  const std::int64_t columns = vt_start(k_tokens, batch);
  return columns < vt_block_columns ? vt_block_columns
                                    : (columns + vt_block_columns - 1) / vt_block_columns * vt_block_columns;
}

// Heads per L2 group when the L2 size is not known.
inline constexpr int default_max_head_group = 16;

// The most heads whose K and V fit in half of an L2 of `l2_bytes` (the other
// half is left to Q, O and what other heads still read), with `k_tokens` keys
// per head (the whole batch's: an upper bound on what is in flight). An H200
// (60 MiB of L2) at 192/128 gets 6 heads for 8k keys (groups of 4 of 128
// heads), 3 for 16k and 16 (the default's cap) for 2k. 0 bytes: unknown, the
// default.
MLA_HOST_DEVICE constexpr int l2_max_head_group(std::size_t l2_bytes, std::int64_t k_tokens, int head_dim_qk,
                                                int head_dim_v) {
  const std::int64_t per_head = k_tokens * (head_dim_qk + head_dim_v) * 2;
  if (l2_bytes == 0 || per_head <= 0) return default_max_head_group;
  const std::int64_t fit = static_cast<std::int64_t>(l2_bytes / 2) / per_head;
  return fit < 1 ? 1 : (fit > default_max_head_group ? default_max_head_group : static_cast<int>(fit));
}

// Heads per L2 group: blocks walk the tiles of a group of heads (heaviest
// query tile first) before the next group, so the K and V of the heads in
// flight stay in L2. The largest divisor of num_heads up to `max_group`.
MLA_HOST_DEVICE constexpr int head_group(int num_heads, int max_group = default_max_head_group) {
  int group = 1;
  for (int g = 1; g <= max_group && g <= num_heads; ++g) {
    if (num_heads % g == 0) group = g;
  }
  return group;
}

// --- The devices it runs on, and the chooser ---

inline constexpr DeviceBackend queue_kind = DeviceBackend::cuda;

// One predicate, read by the entry (the selector's capability check) and by
// the backend when it is handed a queue, so the two cannot disagree. wgmma
// and setmaxnreg exist only in the arch-specific sm_90a target, whose code
// runs on compute capability 9.0 and nothing else: not on 8.x, and not on
// 10.x or 12.x either (they lack wgmma).
inline bool supports_device(const DeviceCapability& device) {
  return device.vendor == Vendor::nvidia && device.major == 9 && device.minor == 0;
}

// Empty when supports_device(device); otherwise why not, for an error message.
inline std::string device_gap(const DeviceCapability& device) {
  if (supports_device(device)) return {};
  return "runs sm_90a code (wgmma, TMA, mbarriers), which only an NVIDIA GPU of compute capability 9.0 "
         "(H100, H200) executes; the queue's device is " +
         device.describe() + " (CUDA_FLASH serves it)";
}

// The kernel chooser (cuda_hip/kernel_choice.hpp) over the tile table and
// the device rule: the entry's validate(), the backend's planning and every
// launch ask it.
// float8_e4m3 inputs run on every device the backend runs on (wgmma takes
// e4m3 on sm_90a), with the same tile and half the stages' bytes.
inline gpu::KernelChoice choose_kernel(const gpu::KernelRequest& request) {
  gpu::TableRow row;
  if (const HopperTileConfig* tile = find_hopper_tile_config(request.dims.qk_head_dim(), request.dims.v_head_dim)) {
    const HopperTileConfig launched = tile->with_input_bytes(request.dtype == DType::float8_e4m3 ? 1 : 2);
    row = {true, {tile->head_dim_qk, tile->head_dim_v, block_rows, tile->block_cols}, launched.shared_bytes()};
  }
  return gpu::choose_from_table(request, row, device_gap, "shared memory", true);
}

// --- The kernel's schedule ---

// What a launch passes besides FlashParams and the tensor maps: the
// persistent schedule (hopper_launch.hpp builds it).
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
