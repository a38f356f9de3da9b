// The emulator's scheduler, barriers, warp collectives and shared-memory
// shadow state. The instruction semantics (ldmatrix, mma, MFMA, shuffles)
// are in warp_ops.cpp.
#include "emulator.hpp"

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>

#include "block.hpp"
#include "hopper_internal.hpp"
#include "mla/error.hpp"

namespace mla::simt {
namespace ctx = boost::context;

namespace {

// Fiber stacks: the kernels keep their fragments in locals, and sanitizer
// builds grow frames several times over.
constexpr std::size_t stack_bytes = 256 * 1024;
constexpr unsigned max_block_threads = 1024;
constexpr std::size_t max_shared_alignment = 4096;

std::mutex statistics_mutex;
Statistics total_statistics;
thread_local Schedule current_schedule = Schedule::forward;

// Hands one preallocated stack to one fiber; the pool owns the memory.
class PoolStack {
 public:
  PoolStack(char* base, std::size_t size) : base_(base), size_(size) {}
  ctx::stack_context allocate() {
    ctx::stack_context context;
    context.size = size_;
    context.sp = base_ + size_;
    return context;
  }
  void deallocate(ctx::stack_context&) noexcept {}

 private:
  char* base_;
  std::size_t size_;
};

// Stacks reused by every launch of the calling thread.
char* stack_pool(unsigned threads) {
  thread_local std::unique_ptr<char[]> pool;
  thread_local unsigned capacity = 0;
  if (threads > capacity) {
    pool.reset(new char[static_cast<std::size_t>(threads) * stack_bytes]);
    capacity = threads;
  }
  return pool.get();
}

std::string to_hex(std::uint32_t value) {
  std::ostringstream os;
  os << std::hex << value;
  return os.str();
}

bool same_site(const Site& a, const Site& b) { return a.line == b.line && std::strcmp(a.file, b.file) == 0; }

// A deadlock: no thread can run and nothing will release one. Names up to
// four distinct waits.
[[noreturn]] void fail_deadlock(Block& block) {
  std::ostringstream os;
  os << "deadlock: no thread can make progress";
  int named = 0;
  std::vector<std::string> seen;
  for (const Thread& t : block.threads) {
    if (t.wait == Wait::done) continue;
    std::string what = describe_wait(block, t);
    if (std::find(seen.begin(), seen.end(), what) != seen.end()) continue;
    seen.push_back(what);
    if (named++ == 4) {
      os << "; ...";
      break;
    }
    os << "; thread " << t.linear << " " << what;
  }
  current_thread = nullptr;
  block.fail(os.str());
}

// Every live thread waits; run the async engines, release the barrier or
// explain the stall.
void resolve_stall(Block& block) {
  if (run_async_engines(block)) return;
  const Thread* at_barrier = nullptr;
  const Thread* exited = nullptr;
  bool all_at_barrier = true;
  for (const Thread& t : block.threads) {
    if (t.wait == Wait::done) {
      if (exited == nullptr) exited = &t;
      continue;
    }
    if (t.wait == Wait::warp) {
      // Some lane of this warp never arrived: say where each one is.
      std::ostringstream os;
      os << "warp " << t.warp << " deadlocks: lane " << t.lane << " waits at " << t.op << " (" << where(t.site) << ")";
      for (const Thread& other : block.threads) {
        if (other.warp != t.warp || other.wait == Wait::warp) continue;
        os << ", lane " << other.lane << ' ' << describe_wait(block, other);
        break;
      }
      block.fail(os.str());
    }
    if (t.wait != Wait::barrier) {
      all_at_barrier = false;
      continue;
    }
    if (at_barrier == nullptr) {
      at_barrier = &t;
    } else if (!same_site(at_barrier->site, t.site)) {
      block.fail("threads at different barriers: thread " + std::to_string(at_barrier->linear) + " at " +
                 where(at_barrier->site) + ", thread " + std::to_string(t.linear) + " at " + where(t.site));
    }
  }
  if (!all_at_barrier) fail_deadlock(block);
  if (at_barrier == nullptr) return;
  if (exited != nullptr) {
    block.fail("thread " + std::to_string(exited->linear) + " exited while thread " +
               std::to_string(at_barrier->linear) + " waits at __syncthreads (" + where(at_barrier->site) + ")");
  }
  block.stats.barrier_checks += block.threads.size();
  count_barrier();
  ++block.epoch;
  ++block.serial;
  ++block.activity;
  // __syncthreads_or: every thread leaves with the OR of the block's votes
  // (a plain __syncthreads votes 0).
  bool any_vote = false;
  for (const Thread& t : block.threads) any_vote = any_vote || t.vote;
  for (Thread& t : block.threads) {
    t.wait = Wait::ready;
    t.sync_serial = block.serial;
    t.vote_result = any_vote;
  }
}

void run_block(Block& block, const std::function<void()>& kernel, char* stacks) {
  const std::size_t n = block.threads.size();
  for (std::size_t i = 0; i < n; ++i) {
    Thread& t = block.threads[i];
    t.fiber = ctx::fiber(std::allocator_arg, PoolStack(stacks + i * stack_bytes, stack_bytes),
                         [&block, &t, &kernel](ctx::fiber&& scheduler) {
                           t.scheduler = std::move(scheduler);
                           try {
                             kernel();
                           } catch (const ctx::detail::forced_unwind&) {
                             throw;  // a block torn down after another thread's error
                           } catch (...) {
                             if (!block.error) block.error = std::current_exception();
                           }
                           t.wait = Wait::done;
                           return std::move(t.scheduler);
                         });
  }
  const bool reverse = current_schedule == Schedule::reverse;
  for (;;) {
    bool progressed = false;
    bool all_done = true;
    for (std::size_t k = 0; k < n; ++k) {
      Thread& t = block.threads[reverse ? n - 1 - k : k];
      if (t.wait == Wait::ready) {
        current_thread = &t;
        t.fiber = std::move(t.fiber).resume();
        current_thread = nullptr;
        progressed = true;
        if (block.error) std::rethrow_exception(block.error);
      }
      all_done = all_done && t.wait == Wait::done;
    }
    if (all_done) break;
    if (!progressed) {
      try {
        resolve_stall(block);
      } catch (...) {
        block.error = std::current_exception();
        throw;
      }
    }
  }
  check_exit_state(block);
  for (const Thread& t : block.threads) {
    const PendingCopy* copy = !t.open.empty() ? &t.open.front() : nullptr;
    for (const auto& group : t.committed) {
      if (copy == nullptr && !group.empty()) copy = &group.front();
    }
    if (copy != nullptr) {
      current_thread = const_cast<Thread*>(&t);
      block.fail_at(copy->chunk * chunk_bytes,
                    "the kernel exits with cp.async copies still in flight (no cp.async.wait_group retired them)");
    }
  }
}

}  // namespace

thread_local Block* current_block = nullptr;
thread_local Thread* current_thread = nullptr;

std::string where(const Site& site) { return std::string(site.file) + ":" + std::to_string(site.line); }

void Block::fail(const std::string& what) const {
  std::ostringstream os;
  os << "GPU emulator: " << config->kernel << ", block (" << index.x << ", " << index.y << ", " << index.z << ")";
  if (current_thread != nullptr) os << ", thread " << current_thread->linear;
  os << ": " << what;
  raise(ErrorCategory::device, os.str());
}

void Block::fail_at(std::uint32_t address, const std::string& what) const {
  std::ostringstream os;
  os << "shared address 0x" << std::hex << address << std::dec << ": " << what;
  fail(os.str());
}

void yield(Thread& thread) { thread.scheduler = std::move(thread.scheduler).resume(); }

Statistics statistics() {
  const std::lock_guard<std::mutex> lock(statistics_mutex);
  return total_statistics;
}

void reset_statistics() {
  const std::lock_guard<std::mutex> lock(statistics_mutex);
  total_statistics = {};
}

std::string describe(const Statistics& counts) {
  std::ostringstream os;
  os << "launches " << counts.launches << ", blocks " << counts.blocks << ", hazard checks " << counts.hazards_checked()
     << " (shared " << counts.shared_checks << ", global " << counts.global_checks << ", warp lanes "
     << counts.collective_checks << ", barrier threads " << counts.barrier_checks << ")";
  return os.str();
}

void set_schedule(Schedule schedule) { current_schedule = schedule; }
Schedule schedule() { return current_schedule; }

void launch(const LaunchConfig& config, const std::function<void()>& kernel) {
  const std::uint64_t threads = static_cast<std::uint64_t>(config.block.x) * config.block.y * config.block.z;
  if (threads == 0 || threads > max_block_threads) {
    raise(ErrorCategory::invalid_argument,
          "GPU emulator: " + config.kernel + " launched with " + std::to_string(threads) + " threads per block");
  }
  if (config.warp_size != 32 && config.warp_size != 64) {
    raise(ErrorCategory::invalid_argument, "GPU emulator: warp size " + std::to_string(config.warp_size));
  }
  if (current_block != nullptr) {
    raise(ErrorCategory::internal, "GPU emulator: " + config.kernel + " launched from inside a kernel");
  }
  const std::size_t alignment = config.dynamic_shared_alignment;
  if (alignment < chunk_bytes || alignment > max_shared_alignment || (alignment & (alignment - 1)) != 0) {
    raise(ErrorCategory::invalid_argument,
          "GPU emulator: " + config.kernel + " declares a dynamic shared alignment of " + std::to_string(alignment) +
              " bytes (a power of two, 16.." + std::to_string(max_shared_alignment) + ")");
  }
  char* stacks = stack_pool(static_cast<unsigned>(threads));
  Block block;
  block.config = &config;
  // Exactly the declared alignment, never more: the array starts at an odd
  // multiple of it, so a kernel that needs more (a 1024-byte swizzle repeat
  // from a 128-byte declaration) meets a misaligned tile.
  block.shared_base = static_cast<std::uint32_t>(alignment);
  block.shared.resize(config.dynamic_shared_bytes);
  block.warpgroups.resize((threads + 127) / 128);
  block.shadow.resize((config.dynamic_shared_bytes + chunk_bytes - 1) / chunk_bytes);
  block.threads.resize(threads);
  block.warps.resize((threads + config.warp_size - 1) / config.warp_size);
  struct Reset {
    ~Reset() {
      current_block = nullptr;
      current_thread = nullptr;
    }
  } reset;
  current_block = &block;
  Statistics stats;
  stats.launches = 1;
  for (unsigned z = 0; z < config.grid.z; ++z) {
    for (unsigned y = 0; y < config.grid.y; ++y) {
      for (unsigned x = 0; x < config.grid.x; ++x) {
        block.index = {x, y, z};
        block.epoch = 0;
        block.error = nullptr;
        std::fill(block.shared.begin(), block.shared.end(), poison_byte);
        std::fill(block.shadow.begin(), block.shadow.end(), ShadowChunk{});
        if (config.static_shared != nullptr) std::memset(config.static_shared, poison_byte, config.static_shared_bytes);
        for (auto& w : block.warps) w = WarpCollective{};
        for (auto& w : block.warpgroups) w = WarpCollective{};
        block.warpgroup_retired.assign(block.warpgroups.size(), 0);
        block.warpgroup_registers.assign(block.warpgroups.size(), 0);
        block.mbarriers.clear();
        for (auto& b : block.named) b = NamedBarrier{};
        block.activity = 0;
        block.serial = 0;
        unsigned linear = 0;
        for (unsigned tz = 0; tz < config.block.z; ++tz) {
          for (unsigned ty = 0; ty < config.block.y; ++ty) {
            for (unsigned tx = 0; tx < config.block.x; ++tx, ++linear) {
              Thread& t = block.threads[linear];
              t = Thread{};
              t.index = {tx, ty, tz};
              t.linear = static_cast<int>(linear);
              t.warp = static_cast<int>(linear) / config.warp_size;
              t.lane = static_cast<int>(linear) % config.warp_size;
            }
          }
        }
        run_block(block, kernel, stacks);
        flush_block_cost(block);
        ++block.cost.blocks;
        // Drop the finished fibers before the next block reuses their stacks.
        for (Thread& t : block.threads) t.fiber = {};
        ++stats.blocks;
      }
    }
  }
  block.cost.launches = 1;
  merge_launch_cost(config.kernel, block.cost);
  stats.shared_checks = block.stats.shared_checks;
  stats.global_checks = block.stats.global_checks;
  stats.collective_checks = block.stats.collective_checks;
  stats.barrier_checks = block.stats.barrier_checks;
  const std::lock_guard<std::mutex> lock(statistics_mutex);
  total_statistics.launches += stats.launches;
  total_statistics.blocks += stats.blocks;
  total_statistics.shared_checks += stats.shared_checks;
  total_statistics.global_checks += stats.global_checks;
  total_statistics.collective_checks += stats.collective_checks;
  total_statistics.barrier_checks += stats.barrier_checks;
}

const Dim3& thread_index() { return current_thread->index; }
const Dim3& block_index() { return current_block->index; }
const Dim3& block_dim() { return current_block->config->block; }
const Dim3& grid_dim() { return current_block->config->grid; }
int warp_size() { return current_block->config->warp_size; }

void sync_threads(Site site) {
  Thread& t = *current_thread;
  t.wait = Wait::barrier;
  t.site = site;
  t.op = "__syncthreads";
  t.vote = false;
  yield(t);
}

int sync_threads_or(int predicate, Site site) {
  Thread& t = *current_thread;
  t.wait = Wait::barrier;
  t.site = site;
  t.op = "__syncthreads_or";
  t.vote = predicate != 0;
  yield(t);
  return t.vote_result ? 1 : 0;
}

// ---- Warp collectives ----

void collective(const char* op, Site site, const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
                CollectiveFn compute) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  const int width = block.config->warp_size;
  const int first = t.warp * width;
  if (first + width > static_cast<int>(block.threads.size())) {
    block.fail(std::string(op) + " in a partial warp (the block size is not a multiple of " + std::to_string(width) +
               ")");
  }
  WarpCollective& w = block.warps[static_cast<std::size_t>(t.warp)];
  for (int lane = 0; lane < width; ++lane) {
    const Thread& other = block.threads[static_cast<std::size_t>(first + lane)];
    if (other.wait == Wait::done) {
      block.fail(std::string(op) + " at " + where(site) + ": lane " + std::to_string(lane) + " of warp " +
                 std::to_string(t.warp) + " has exited; every lane must take part");
    }
  }
  if (!w.active) {
    w.active = true;
    w.op = op;
    w.site = site;
    w.first_lane = t.lane;
    w.arrived = 0;
  } else if (w.op != op || !same_site(w.site, site)) {
    block.fail("warp " + std::to_string(t.warp) + " diverges: lane " + std::to_string(t.lane) + " at " + op + " (" +
               where(site) + ") while lane " + std::to_string(w.first_lane) + " waits at " + w.op + " (" +
               where(w.site) + ")");
  }
  std::memcpy(t.in, in, in_bytes);
  ++block.stats.collective_checks;
  t.wait = Wait::warp;
  t.site = site;
  t.op = op;
  if (++w.arrived == width) {
    w.active = false;
    compute(block, first);
    for (int lane = 0; lane < width; ++lane) block.threads[static_cast<std::size_t>(first + lane)].wait = Wait::ready;
  } else {
    yield(t);
  }
  std::memcpy(out, t.out, out_bytes);
}

void warpgroup_collective(const char* op, Site site, void* arg, CollectiveFn compute) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  const int group = t.linear / 128;
  const int first = group * 128;
  if (block.config->warp_size != 32) block.fail(std::string(op) + ": warpgroups exist only with 32-lane warps");
  if (first + 128 > static_cast<int>(block.threads.size())) {
    block.fail(std::string(op) + " at " + where(site) + " in a partial warpgroup (the block has " +
               std::to_string(block.threads.size()) + " threads, not a multiple of 128)");
  }
  WarpCollective& w = block.warpgroups[static_cast<std::size_t>(group)];
  for (int i = 0; i < 128; ++i) {
    const Thread& other = block.threads[static_cast<std::size_t>(first + i)];
    if (other.wait == Wait::done) {
      block.fail(std::string(op) + " at " + where(site) + ": thread " + std::to_string(first + i) + " of warpgroup " +
                 std::to_string(group) + " has exited; all 128 threads must take part");
    }
  }
  if (!w.active) {
    w.active = true;
    w.op = op;
    w.site = site;
    w.first_lane = t.linear;
    w.arrived = 0;
  } else if (std::strcmp(w.op, op) != 0 || !same_site(w.site, site)) {
    block.fail("warpgroup " + std::to_string(group) + " diverges: thread " + std::to_string(t.linear) + " at " + op +
               " (" + where(site) + ") while thread " + std::to_string(w.first_lane) + " waits at " + w.op + " (" +
               where(w.site) + ")");
  }
  t.arg = arg;
  ++block.stats.collective_checks;
  ++block.activity;
  t.wait = Wait::warpgroup;
  t.site = site;
  t.op = op;
  if (++w.arrived == 128) {
    w.active = false;
    compute(block, first);
    for (int i = 0; i < 128; ++i) block.threads[static_cast<std::size_t>(first + i)].wait = Wait::ready;
  } else {
    yield(t);
  }
  t.arg = nullptr;
}

// ---- Shared memory and cp.async ----

std::uint32_t shared_address(const void* ptr, Site site) {
  const Block& block = *current_block;
  const auto* anchor = static_cast<const unsigned char*>(block.config->dynamic_shared_symbol);
  const auto* p = static_cast<const unsigned char*>(ptr);
  if (anchor == nullptr || p != anchor) {
    block.fail("shared_address at " + where(site) +
               " of a pointer that is not the kernel's extern __shared__ array (or the launch declared none)");
  }
  return block.shared_base;
}

ShadowChunk& Block::chunk_for(std::uint32_t address, const char* access, const Site& site) {
  ++stats.shared_checks;
  if (address % chunk_bytes != 0)
    fail_at(address, std::string(access) + " at " + where(site) + " is not 16-byte aligned");
  if (address < shared_base || static_cast<std::size_t>(address - shared_base) + chunk_bytes > shared.size()) {
    fail_at(address, std::string(access) + " at " + where(site) + " is outside the block's " +
                         std::to_string(shared.size()) + " bytes of dynamic shared memory (shared addresses 0x" +
                         to_hex(shared_base) + " on)");
  }
  return shadow_of(address);
}

void Block::check_read(int thread, std::uint32_t address, const char* access, const Site& site) {
  ShadowChunk& c = chunk_for(address, access, site);
  if (c.copy_thread == thread) {
    fail_at(address, std::string(access) + " at " + where(site) + " (thread " + std::to_string(thread) +
                         ") reads it before the cp.async.wait_group that lands its own copy");
  }
  if (c.copy_thread >= 0) {
    fail_at(address, std::string(access) + " at " + where(site) + " (thread " + std::to_string(thread) +
                         ") reads it while thread " + std::to_string(c.copy_thread) + "'s cp.async to it is in flight");
  }
  if (c.tma_thread >= 0) {
    fail_at(address, std::string(access) + " at " + where(site) + " (thread " + std::to_string(thread) +
                         ") reads a TMA box still in flight (issued by thread " + std::to_string(c.tma_thread) + ")");
  }
  if (c.writer >= 0 && c.writer != thread && c.write_epoch == epoch) {
    fail_at(address, std::string(access) + " at " + where(site) + " (thread " + std::to_string(thread) +
                         ") reads what thread " + std::to_string(c.writer) + " wrote with no __syncthreads in between");
  }
  if (c.read_epoch != epoch) {
    c.read_epoch = epoch;
    c.reader = thread;
    c.many_readers = false;
  } else if (c.reader != thread) {
    c.many_readers = true;
  }
}

void cp_async_16(std::uint32_t dst, const void* src, bool fill, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  ShadowChunk& c = block.chunk_for(dst, "cp.async", site);
  // Chunks the sm_90 engines still use (or an mbarrier): checked only then.
  if (c.mbarrier || c.tma_thread >= 0 || c.wgmma_warpgroup >= 0 || c.store_thread >= 0) {
    check_overwrite(block, dst, "cp.async", site);
  }
  if (c.copy_thread >= 0) {
    block.fail_at(dst, "cp.async at " + where(site) + ": a copy by thread " + std::to_string(c.copy_thread) +
                           " to the same chunk is still in flight");
  }
  if (c.read_epoch == block.epoch && (c.many_readers || c.reader != t.linear)) {
    block.fail_at(dst, "cp.async at " + where(site) + " overwrites a chunk thread " + std::to_string(c.reader) +
                           " read with no __syncthreads in between");
  }
  if (c.writer >= 0 && c.writer != t.linear && c.write_epoch == block.epoch) {
    block.fail_at(dst, "cp.async at " + where(site) + " overwrites what thread " + std::to_string(c.writer) +
                           " wrote with no __syncthreads in between");
  }
  PendingCopy copy;
  copy.chunk = dst / chunk_bytes;  // a shared address / 16, base included
  if (fill) {
    const auto address = reinterpret_cast<std::uintptr_t>(src);
    const auto& ranges = block.config->global_reads;
    if (!ranges.empty()) {
      ++block.stats.global_checks;
      const bool inside = std::any_of(ranges.begin(), ranges.end(), [&](const MemoryRange& r) {
        const auto begin = reinterpret_cast<std::uintptr_t>(r.begin);
        return address >= begin && address + chunk_bytes <= begin + r.bytes;
      });
      if (!inside) {
        std::ostringstream os;
        os << "cp.async at " << where(site) << " reads global address 0x" << std::hex << address << std::dec
           << ", outside every input of the launch (";
        for (std::size_t i = 0; i < ranges.size(); ++i) os << (i ? ", " : "") << ranges[i].what;
        os << ")";
        block.fail_at(dst, os.str());
      }
    }
    std::memcpy(copy.data, src, chunk_bytes);
  } else {
    std::memset(copy.data, 0, chunk_bytes);
  }
  // Until the wait lands it, the destination reads as poison.
  std::memset(block.bytes(dst), poison_byte, chunk_bytes);
  c.copy_thread = t.linear;
  t.open.push_back(copy);
  count_global_lane_read(fill ? src : nullptr, chunk_bytes, site.file, site.line);
  count_shared_lane_access(dst, chunk_bytes, site.file, site.line);
}

void cp_async_commit() {
  Thread& t = *current_thread;
  t.committed.push_back(std::move(t.open));
  t.open.clear();
}

void cp_async_wait(int pending, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  if (pending < 0) block.fail("cp.async.wait_group at " + where(site) + " with a negative count");
  while (t.committed.size() > static_cast<std::size_t>(pending)) {
    for (const PendingCopy& copy : t.committed.front()) {
      std::memcpy(block.bytes(copy.chunk * chunk_bytes), copy.data, chunk_bytes);
      ShadowChunk& c = block.shadow_of(copy.chunk * chunk_bytes);
      c.copy_thread = -1;
      c.writer = t.linear;
      c.write_epoch = block.epoch;
    }
    t.committed.pop_front();
  }
}

}  // namespace mla::simt
