// What the emulated launches would cost a GPU: per kernel (LaunchConfig::
// kernel), the tensor-core FLOPs, the shared-memory wavefronts of the warp-wide
// accesses the emulator sees (with their bank-conflict replays), the global
// bytes the asynchronous copies request, the exponentials and the block-wide
// barriers. Counted only while set_cost_counting(true): the tests pay nothing.
//
// Seen: mma.sync, wgmma and MFMA products; ldmatrix, stmatrix and cp.async
// destinations in shared memory; cp.async, TMA and sm80::load_global sources
// in global memory;
// sm80::exp2_ftz; __syncthreads, named-barrier and mbarrier phases. Not seen:
// plain C++ loads and stores (the HIP kernel's LDS accesses, every kernel's
// output stores) and the host's
// exp2f in HIP code. A tool that reports these counts says so.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mla::simt {

struct KernelCost {
  std::uint64_t launches = 0;
  std::uint64_t blocks = 0;
  std::uint64_t tensor_flops = 0;       // 2 m n k per product
  std::uint64_t shared_phases = 0;      // 128-byte phases of warp-wide shared accesses
  std::uint64_t shared_wavefronts = 0;  // what 32 banks of 4 bytes serve them in
  std::uint64_t global_read_bytes = 0;  // requested: cp.async (16 per copy that reads), TMA boxes, load_global
  std::uint64_t global_sectors = 0;     // the 32-byte sectors those requests touch, per warp-wide request
  std::uint64_t exps = 0;               // ex2 per thread
  std::uint64_t barriers = 0;           // block-wide barriers and completed mbarrier phases
  // Extra wavefronts caused by bank conflicts (0 when every phase is conflict-free).
  std::uint64_t bank_conflict_replays() const { return shared_wavefronts - shared_phases; }
  KernelCost& operator+=(const KernelCost& other);
};

void set_cost_counting(bool on);
bool cost_counting();
// Per kernel name, summed over the launches since the last reset.
std::map<std::string, KernelCost> kernel_costs();
void reset_kernel_costs();

// One warp-wide shared access of `bytes_each` (4, 8 or 16) bytes per lane,
// given as (lane, shared address) pairs: the lanes are served in phases of
// 128 bytes (32, 16 or 8 consecutive lanes), each phase in as many wavefronts
// as the most distinct 4-byte words any one bank holds. Returns
// {phases, wavefronts}.
std::pair<unsigned, unsigned> bank_wavefronts(const std::vector<std::pair<int, std::uint32_t>>& accesses,
                                              unsigned bytes_each);

// Hooks the instruction semantics call (no-ops while counting is off).
void count_exp();
void count_tensor_flops(std::uint64_t flops);
// A box the TMA reads: whole sectors.
void count_global_read(std::uint64_t bytes);
// One lane's part of a per-thread global read (cp.async, load_global),
// grouped like count_shared_lane_access into a warp-wide request whose
// distinct 32-byte sectors are counted. `address` null: the lane takes part
// but reads nothing (a zero-filling cp.async).
void count_global_lane_read(const void* address, unsigned bytes, const char* file, unsigned line);
void count_barrier();
// Shared bytes an asynchronous engine moves (wgmma operands, TMA boxes):
// swizzled, so whole 128-byte wavefronts without conflicts.
void count_shared_bytes(std::uint64_t bytes);
// A warp-wide access whose lanes all arrived together (ldmatrix, stmatrix).
void count_shared_access(const std::vector<std::pair<int, std::uint32_t>>& accesses, unsigned bytes_each);
// One lane's part of a per-thread access (cp.async): grouped with the other
// lanes' by warp, call site and how often this thread reached the site.
void count_shared_lane_access(std::uint32_t address, unsigned bytes_each, const char* file, unsigned line);

}  // namespace mla::simt
