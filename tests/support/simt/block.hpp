// The emulator's per-block state, shared by the scheduler (emulator.cpp) and
// the instruction semantics (warp_ops.cpp). Internal to tests/support/simt.
#pragma once

#include <boost/context/fiber.hpp>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "emulator.hpp"
#include "simt/cost.hpp"

namespace mla::simt {

inline constexpr std::uint32_t chunk_bytes = 16;
// All ones: NaN in fp32, fp16 and bf16, and in fp8 e4m3.
inline constexpr unsigned char poison_byte = 0xff;
// Largest per-lane operand of a collective (an MFMA: 64 accumulator bytes + 16 operand bytes).
inline constexpr std::size_t max_collective_bytes = 96;

// ready: runnable; barrier: __syncthreads; warp / warpgroup: a collective;
// named: bar.sync; mbarrier: a blocking parity wait; spin: a try_wait that
// answered "not yet" and yielded; done: exited.
enum class Wait { ready, barrier, warp, warpgroup, named, mbarrier, spin, done };

// The poison a wgmma leaves in its accumulators until the wait that retires
// it: all ones, a NaN that rounds to the bf16 pattern 0xffff.
inline constexpr std::uint32_t accumulator_poison = 0xffffffffu;

struct PendingCopy {
  std::uint32_t chunk = 0;
  unsigned char data[chunk_bytes];
};

// Shadow of one 16-byte chunk of dynamic shared memory. Epochs count the
// block's completed barriers.
struct ShadowChunk {
  int copy_thread = -1;  // thread whose cp.async to the chunk is in flight
  int writer = -1;       // thread whose copy landed last
  std::uint64_t write_epoch = ~0ull;
  int reader = -1;  // first reader in read_epoch
  std::uint64_t read_epoch = ~0ull;
  bool many_readers = false;
  // sm_90: a TMA load in flight to the chunk (issuer, its mbarrier), or the
  // phase of `landed_bar` whose transaction completed it.
  int tma_thread = -1;
  std::uint32_t tma_bar = 0;
  bool landed = false;
  std::uint32_t landed_bar = 0;
  std::int64_t landed_phase = 0;
  std::uint64_t landed_serial = 0;
  int landed_swizzle = -1;  // the tensor map's swizzle mode
  // A generic-proxy write (stmatrix) not yet followed by the writer's fence.proxy.async.
  int unfenced_writer = -1;
  Site unfenced_site;
  // An async-proxy reader that has not retired: a wgmma of warpgroup
  // `wgmma_warpgroup` in its group `wgmma_group`, a TMA store of `store_thread`.
  int wgmma_warpgroup = -1;
  std::uint64_t wgmma_group = 0;
  int store_thread = -1;
  std::uint64_t store_group = 0;
  bool mbarrier = false;  // holds an mbarrier object
};

// An accumulator array of an issued wgmma and the value it will hold once retired.
struct PendingAccumulator {
  float* d = nullptr;
  std::vector<float> value;
};

struct Thread {
  Dim3 index;
  int linear = 0;
  int warp = 0;
  int lane = 0;
  Wait wait = Wait::ready;
  Site site;
  const char* op = "";
  boost::context::fiber fiber;      // the thread while it is suspended
  boost::context::fiber scheduler;  // where a yield returns to
  alignas(16) unsigned char in[max_collective_bytes];
  alignas(16) unsigned char out[max_collective_bytes];
  std::vector<PendingCopy> open;                   // issued, not yet committed
  std::deque<std::vector<PendingCopy>> committed;  // oldest group first
  // sm_90 state.
  void* arg = nullptr;  // this thread's operand of a warpgroup collective
  std::uint32_t wait_bar = 0;
  unsigned wait_parity = 0;
  bool spin_result = false;
  std::uint64_t spin_activity = 0;
  std::map<std::uint32_t, std::int64_t> observed;  // mbarrier -> last completed phase seen
  std::uint64_t sync_serial = 0;                   // block serial of the last barrier that released it
  bool vote = false;                               // this thread's __syncthreads_or predicate
  bool vote_result = false;                        // the OR its last barrier released it with
  bool wgmma_fenced = false;
  std::vector<PendingAccumulator> wgmma_open;
  std::deque<std::vector<PendingAccumulator>> wgmma_committed;
  std::uint64_t wgmma_groups = 0;         // committed so far
  std::vector<std::uint32_t> store_open;  // chunk addresses a TMA store reads
  std::deque<std::vector<std::uint32_t>> store_committed;
  std::uint64_t store_groups = 0;
  std::vector<std::uint32_t> unfenced;  // chunks written by generic stores since its last fence.proxy.async
  // Cost counting: how often this thread reached each per-thread shared access site.
  std::map<std::pair<const char*, unsigned>, std::uint64_t> site_visits;
};

// The lanes of one per-thread shared access (cost.cpp): the k-th time the
// lanes of a warp reach one call site.
struct LaneGroupKey {
  int warp = 0;
  const char* file = "";
  unsigned line = 0;
  std::uint64_t visit = 0;
  unsigned bytes_each = 0;
  bool operator<(const LaneGroupKey& o) const {
    if (warp != o.warp) return warp < o.warp;
    if (file != o.file) return std::less<const char*>()(file, o.file);
    if (line != o.line) return line < o.line;
    if (visit != o.visit) return visit < o.visit;
    return bytes_each < o.bytes_each;
  }
};

// A cp.async.bulk.tensor load between issue and landing: the box as it will
// lie in shared memory (swizzled), starting at `dst`.
struct TmaTransfer {
  std::uint32_t dst = 0;
  std::vector<unsigned char> bytes;
  int swizzle = 0;
  int thread = 0;
  Site site;
};

struct Mbarrier {
  unsigned count = 0;
  long pending = 0;        // arrivals the current phase still needs
  std::int64_t tx = 0;     // transaction bytes the current phase still needs
  std::int64_t phase = 0;  // completed phases
  int init_thread = 0;
  std::uint64_t init_serial = 0;
  bool fenced = false;  // fence.mbarrier_init (or fence.proxy.async) after init
  Site init_site;
  std::vector<TmaTransfer> queued;
};

struct NamedBarrier {
  unsigned count = 0;
  unsigned arrived = 0;
  int first_thread = -1;
  Site site;
};

struct WarpCollective {
  bool active = false;
  const char* op = "";
  Site site;
  int first_lane = 0;
  int arrived = 0;
};

struct Block;
// Runs once every lane of the warp starting at thread `first` has arrived:
// reads each lane's `in`, writes each lane's `out`. For a warpgroup
// collective, `first` is its first thread and each thread's `arg` its operand.
using CollectiveFn = void (*)(Block& block, int first);

struct Block {
  const LaunchConfig* config = nullptr;
  Dim3 index;
  std::vector<Thread> threads;
  std::vector<WarpCollective> warps;
  std::vector<unsigned char> shared;
  std::vector<ShadowChunk> shadow;
  std::uint64_t epoch = 0;
  std::exception_ptr error;
  Statistics stats;
  // sm_90 state.
  std::uint32_t shared_base = 0;  // shared address of the dynamic array's first byte
  std::vector<WarpCollective> warpgroups;
  std::vector<std::uint64_t> warpgroup_retired;  // wgmma groups each warpgroup retired
  std::vector<int> warpgroup_registers;          // after setmaxnreg; 0: as launched
  std::map<std::uint32_t, Mbarrier> mbarriers;
  NamedBarrier named[16];
  std::uint64_t activity = 0;  // side effects so far: a spin that sees none is stuck
  std::uint64_t serial = 0;    // orders landings against barrier releases
  // Cost counting (cost.hpp): this launch's counts, and per-thread accesses
  // whose warp has not fully arrived yet.
  KernelCost cost;
  std::map<LaneGroupKey, std::vector<std::pair<int, std::uint32_t>>> lane_groups;
  std::map<LaneGroupKey, std::vector<std::uintptr_t>> global_lane_groups;

  unsigned char* bytes(std::uint32_t address) { return shared.data() + (address - shared_base); }
  ShadowChunk& shadow_of(std::uint32_t address) { return shadow[(address - shared_base) / chunk_bytes]; }
  // Releases every thread waiting on a completed mbarrier phase.
  void wake_mbarrier_waiters(std::uint32_t bar);

  // Raise Error(device) naming the kernel, block and current thread.
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail_at(std::uint32_t address, const std::string& what) const;
  // Bounds and alignment of a 16-byte shared access; counts one check.
  ShadowChunk& chunk_for(std::uint32_t address, const char* access, const Site& site);
  // A read of one chunk by `thread`, checked against copies and writes.
  void check_read(int thread, std::uint32_t address, const char* access, const Site& site);
};

extern thread_local Block* current_block;
extern thread_local Thread* current_thread;

void yield(Thread& thread);
std::string where(const Site& site);

// Cost counting (cost.cpp): a finished block's incomplete lane groups, and a
// finished launch's counts into the per-kernel totals.
void flush_block_cost(Block& block);
void merge_launch_cost(const std::string& kernel, const KernelCost& cost);

// A warpgroup-wide operation (128 threads, 4 warps from a multiple of 4):
// `arg` is this thread's operand, read by `compute` once all have arrived.
void warpgroup_collective(const char* op, Site site, void* arg, CollectiveFn compute);

// The sm_90 engines when every thread waits: lands queued TMA loads and wakes
// spinning try_waits if anything happened since they parked. True when
// something changed (hopper_sync.cpp).
bool run_async_engines(Block& block);
// A deadlock's description of what `thread` waits for (hopper_sync.cpp).
std::string describe_wait(const Block& block, const Thread& thread);
// Kernel-exit checks of the sm_90 state (hopper_sync.cpp).
void check_exit_state(Block& block);

// A warp-wide operation: `in` is this lane's operand, `out` receives its result.
void collective(const char* op, Site site, const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
                CollectiveFn compute);

}  // namespace mla::simt
