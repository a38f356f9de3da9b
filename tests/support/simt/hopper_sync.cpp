// sm_90 synchronisation under the emulator: mbarrier phases with arrival and
// transaction counts, fences, named barriers, elect.sync, setmaxnreg, global
// atomics, and the shadow-state checks the async proxy shares with
// hopper_tma.cpp and hopper_wgmma.cpp. Semantics from the PTX ISA.
#include <algorithm>
#include <sstream>
#include <string>

#include "hopper_internal.hpp"
#include "simt/hopper.hpp"

namespace mla::simt {
namespace {

// The parity wait succeeds once the phase of that parity has completed.
bool phase_done(const Mbarrier& m, unsigned parity) { return (static_cast<std::uint64_t>(m.phase) & 1u) != parity; }

// A successful parity wait observes the latest completed phase of that
// parity; seeing the same phase twice means the kernel did not flip its parity.
void observe(Block& block, Thread& t, std::uint32_t bar, const Mbarrier& m, unsigned parity, const Site& site) {
  // A woken waiter may run after the next phase also completed.
  const std::int64_t seen = ((m.phase - 1) & 1) == static_cast<std::int64_t>(parity) ? m.phase - 1 : m.phase - 2;
  const auto it = t.observed.find(bar);
  if (it != t.observed.end() && it->second == seen) {
    block.fail_at(bar, "mbarrier wait for parity " + std::to_string(parity) + " at " + where(site) +
                           " passes on phase " + std::to_string(seen) +
                           ", which this thread already saw complete: a stale phase (the parity was not flipped)");
  }
  t.observed[bar] = seen;
}

int entry_registers(const Block& block) {
  if (block.config->registers_per_thread > 0) return block.config->registers_per_thread;
  const int per_thread = static_cast<int>(65536 / block.threads.size());
  return std::min(255, per_thread) / 8 * 8;
}

struct SetmaxnregArg {
  bool increase;
  int registers;
};

void setmaxnreg_compute(Block& block, int first) {
  const auto& head = *static_cast<const SetmaxnregArg*>(block.threads[static_cast<std::size_t>(first)].arg);
  for (int i = 0; i < 128; ++i) {
    Thread& t = block.threads[static_cast<std::size_t>(first + i)];
    const auto& arg = *static_cast<const SetmaxnregArg*>(t.arg);
    if (arg.increase != head.increase || arg.registers != head.registers) {
      AsThread as(t);
      block.fail("setmaxnreg: the threads of warpgroup " + std::to_string(first / 128) + " ask for different counts");
    }
  }
  const int group = first / 128;
  int& current = block.warpgroup_registers[static_cast<std::size_t>(group)];
  // The count at entry is the compiler's, unknown here unless the launch declares it.
  const bool known = current != 0 || block.config->registers_per_thread > 0;
  if (current == 0) current = entry_registers(block);
  const std::string what = std::string(head.increase ? "setmaxnreg.inc " : "setmaxnreg.dec ") +
                           std::to_string(head.registers) + " in warpgroup " + std::to_string(group);
  if (head.registers < 24 || head.registers > 256 || head.registers % 8 != 0) {
    block.fail(what + ": the count must be a multiple of 8 in 24..256");
  }
  if (known && (head.increase ? head.registers < current : head.registers > current)) {
    block.fail(what + " while it holds " + std::to_string(current) + " registers per thread");
  }
  current = head.registers;
}

}  // namespace

std::string hex(std::uint64_t value) {
  std::ostringstream os;
  os << "0x" << std::hex << value;
  return os.str();
}

std::uint32_t shared_address_of(const void* ptr, Site site) {
  const Block& block = *current_block;
  const auto anchor = reinterpret_cast<std::uintptr_t>(block.config->dynamic_shared_symbol);
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (anchor == 0 || p < anchor || p - anchor > block.shared.size()) {
    block.fail("shared address at " + where(site) +
               " of a pointer outside the kernel's extern __shared__ array (or the launch declared none)");
  }
  return block.shared_base + static_cast<std::uint32_t>(p - anchor);
}

Mbarrier& mbarrier_at(Block& block, std::uint32_t bar, const char* access, const Site& site) {
  const auto it = block.mbarriers.find(bar);
  if (it == block.mbarriers.end()) {
    block.fail_at(bar, std::string(access) + " at " + where(site) + " uses an mbarrier that was never initialised");
  }
  Mbarrier& m = it->second;
  const Thread& t = *current_thread;
  if (t.linear != m.init_thread && t.sync_serial <= m.init_serial) {
    block.fail_at(bar, std::string(access) + " at " + where(site) + " uses an mbarrier thread " +
                           std::to_string(m.init_thread) + " initialised at " + where(m.init_site) +
                           " with no barrier in between");
  }
  return m;
}

void Block::wake_mbarrier_waiters(std::uint32_t bar) {
  const Mbarrier& m = mbarriers.at(bar);
  for (Thread& t : threads) {
    if ((t.wait == Wait::mbarrier || t.wait == Wait::spin) && t.wait_bar == bar && phase_done(m, t.wait_parity)) {
      t.wait = Wait::ready;
      t.spin_result = true;
    }
  }
}

void try_complete_phase(Block& block, std::uint32_t bar) {
  Mbarrier& m = block.mbarriers.at(bar);
  if (m.pending != 0) return;
  if (m.tx < 0) {
    block.fail_at(bar, "mbarrier phase " + std::to_string(m.phase) + " received " + std::to_string(-m.tx) +
                           " transaction bytes more than expect_tx announced (transaction-count underflow)");
  }
  if (m.tx != 0) return;
  ++m.phase;
  count_barrier();
  m.pending = m.count;
  ++block.serial;
  block.wake_mbarrier_waiters(bar);
}

void mbarrier_init(std::uint32_t bar, unsigned arrival_count, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  if (bar % 8 != 0) block.fail_at(bar, "mbarrier.init at " + where(site) + ": an mbarrier is 8-byte aligned");
  if (arrival_count == 0 || arrival_count >= (1u << 20)) {
    block.fail_at(bar, "mbarrier.init at " + where(site) + " with arrival count " + std::to_string(arrival_count));
  }
  const std::uint32_t chunk = bar / chunk_bytes * chunk_bytes;
  // Two mbarriers may share a chunk, and one may be initialised again.
  if (!block.chunk_for(chunk, "mbarrier.init", site).mbarrier) check_overwrite(block, chunk, "mbarrier.init", site);
  const auto old = block.mbarriers.find(bar);
  if (old != block.mbarriers.end()) {
    for (const Thread& other : block.threads) {
      if ((other.wait == Wait::mbarrier || other.wait == Wait::spin) && other.wait_bar == bar) {
        block.fail_at(bar, "mbarrier.init at " + where(site) + " re-initialises an mbarrier thread " +
                               std::to_string(other.linear) + " waits on");
      }
    }
    if (!old->second.queued.empty()) {
      block.fail_at(bar, "mbarrier.init at " + where(site) + " re-initialises an mbarrier a TMA load completes on");
    }
  }
  block.shadow_of(chunk).mbarrier = true;
  Mbarrier m;
  m.count = arrival_count;
  m.pending = arrival_count;
  m.init_thread = t.linear;
  m.init_serial = block.serial;
  m.init_site = site;
  block.mbarriers[bar] = m;
  t.observed.erase(bar);
  ++block.activity;
}

void fence_barrier_init(Site) {
  Block& block = *current_block;
  for (auto& entry : block.mbarriers) {
    if (entry.second.init_thread == current_thread->linear) entry.second.fenced = true;
  }
  ++block.activity;
}

void mbarrier_arrive(std::uint32_t bar, unsigned expect_tx, Site site) {
  Block& block = *current_block;
  Mbarrier& m = mbarrier_at(block, bar, "mbarrier.arrive", site);
  m.tx += expect_tx;
  if (m.pending == 0) {
    block.fail_at(bar, "mbarrier.arrive at " + where(site) + ": phase " + std::to_string(m.phase) +
                           " already has all " + std::to_string(m.count) + " arrivals and waits for " +
                           std::to_string(m.tx) + " transaction bytes (over-arrival)");
  }
  --m.pending;
  ++block.activity;
  try_complete_phase(block, bar);
}

void mbarrier_expect_tx(std::uint32_t bar, unsigned tx_bytes, Site site) {
  Block& block = *current_block;
  Mbarrier& m = mbarrier_at(block, bar, "mbarrier.expect_tx", site);
  m.tx += tx_bytes;
  ++block.activity;
}

bool mbarrier_try_wait_parity(std::uint32_t bar, unsigned parity, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  Mbarrier& m = mbarrier_at(block, bar, "mbarrier.try_wait", site);
  ++block.stats.barrier_checks;
  if (!phase_done(m, parity & 1u) && m.pending == 0 && !m.queued.empty()) {
    land_transfers(block, bar);
    try_complete_phase(block, bar);
  }
  if (!phase_done(m, parity & 1u)) {
    t.wait = Wait::spin;
    t.wait_bar = bar;
    t.wait_parity = parity & 1u;
    t.site = site;
    t.op = "mbarrier.try_wait";
    t.spin_result = false;
    t.spin_activity = block.activity;
    yield(t);
    if (!t.spin_result) return false;
  }
  observe(block, t, bar, m, parity & 1u, site);
  return true;
}

void mbarrier_wait_parity(std::uint32_t bar, unsigned parity, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  Mbarrier& m = mbarrier_at(block, bar, "mbarrier wait", site);
  ++block.stats.barrier_checks;
  if (!phase_done(m, parity & 1u) && m.pending == 0 && !m.queued.empty()) {
    land_transfers(block, bar);
    try_complete_phase(block, bar);
  }
  if (!phase_done(m, parity & 1u)) {
    t.wait = Wait::mbarrier;
    t.wait_bar = bar;
    t.wait_parity = parity & 1u;
    t.site = site;
    t.op = "mbarrier wait";
    yield(t);
  }
  observe(block, t, bar, m, parity & 1u, site);
}

void fence_proxy_async(Site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  for (const std::uint32_t chunk : t.unfenced) {
    ShadowChunk& c = block.shadow_of(chunk);
    if (c.unfenced_writer == t.linear) c.unfenced_writer = -1;
  }
  t.unfenced.clear();
  for (auto& entry : block.mbarriers) {
    if (entry.second.init_thread == t.linear) entry.second.fenced = true;
  }
  ++block.activity;
}

void named_barrier(unsigned id, unsigned thread_count, bool wait, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  const std::string what = std::string(wait ? "bar.sync " : "bar.arrive ") + std::to_string(id) + ", " +
                           std::to_string(thread_count) + " at " + where(site);
  if (id == 0 || id > 15) block.fail(what + ": ids 1..15 (0 is __syncthreads' barrier)");
  if (thread_count == 0 || thread_count % 32 != 0 || thread_count > block.threads.size()) {
    block.fail(what + ": the count must be a multiple of 32 up to the block's " + std::to_string(block.threads.size()) +
               " threads");
  }
  NamedBarrier& b = block.named[id];
  if (b.arrived == 0) {
    b.count = thread_count;
    b.first_thread = t.linear;
    b.site = site;
  } else if (b.count != thread_count) {
    block.fail(what + " while thread " + std::to_string(b.first_thread) + " arrived with count " +
               std::to_string(b.count) + " at " + where(b.site));
  }
  ++block.stats.barrier_checks;
  ++block.activity;
  if (++b.arrived == b.count) {
    b = NamedBarrier{};
    count_barrier();
    ++block.serial;
    ++block.epoch;
    for (Thread& other : block.threads) {
      if (other.wait == Wait::named && other.wait_bar == id) {
        other.wait = Wait::ready;
        other.sync_serial = block.serial;
      }
    }
    t.sync_serial = block.serial;
    return;
  }
  if (!wait) return;
  t.wait = Wait::named;
  t.wait_bar = id;
  t.site = site;
  t.op = "bar.sync";
  yield(t);
}

namespace {
void elect_compute(Block& block, int first) {
  // Which lane wins is not specified: the forward schedule elects the lowest
  // lane and the reverse one the highest, so a kernel that assumes lane 0 fails.
  const int winner = schedule() == Schedule::forward ? 0 : block.config->warp_size - 1;
  for (int lane = 0; lane < block.config->warp_size; ++lane) {
    block.threads[static_cast<std::size_t>(first + lane)].out[0] = lane == winner ? 1 : 0;
  }
}
}  // namespace

bool elect_one(Site site) {
  const unsigned char in = 0;
  unsigned char out = 0;
  collective("elect.sync", site, &in, sizeof in, &out, sizeof out, elect_compute);
  ++current_block->activity;
  return out != 0;
}

void setmaxnreg(bool increase, int registers, Site site) {
  SetmaxnregArg arg{increase, registers};
  warpgroup_collective(increase ? "setmaxnreg.inc" : "setmaxnreg.dec", site, &arg, setmaxnreg_compute);
}

int atomic_add(int* address, int value, Site site) {
  Block& block = *current_block;
  if (address == nullptr || reinterpret_cast<std::uintptr_t>(address) % alignof(int) != 0) {
    block.fail("atomicAdd at " + where(site) + " on a null or misaligned address");
  }
  ++block.activity;
  const int old = *address;
  *address = old + value;
  return old;
}

bool run_async_engines(Block& block) {
  bool changed = false;
  for (auto& entry : block.mbarriers) {
    if (entry.second.queued.empty()) continue;
    land_transfers(block, entry.first);
    try_complete_phase(block, entry.first);
    changed = true;
  }
  if (changed) return true;
  // A try_wait that answered "not yet" runs again only if something happened
  // since: a spin that nothing can end is a deadlock, not a hang.
  for (Thread& t : block.threads) {
    if (t.wait == Wait::spin && t.spin_activity != block.activity) {
      t.wait = Wait::ready;
      t.spin_result = false;
      changed = true;
    }
  }
  return changed;
}

std::string describe_wait(const Block& block, const Thread& t) {
  const std::string at = " (" + where(t.site) + ")";
  switch (t.wait) {
    case Wait::ready:
      return "is runnable";
    case Wait::done:
      return "has exited";
    case Wait::barrier:
      return "waits at __syncthreads" + at;
    case Wait::warp:
      return std::string("waits at ") + t.op + at + " for the rest of warp " + std::to_string(t.warp);
    case Wait::warpgroup:
      return std::string("waits at ") + t.op + at + " for the rest of warpgroup " + std::to_string(t.linear / 128);
    case Wait::named: {
      const NamedBarrier& b = block.named[t.wait_bar];
      return "waits at bar.sync " + std::to_string(t.wait_bar) + at + ": " + std::to_string(b.arrived) + " of " +
             std::to_string(b.count) + " threads arrived";
    }
    case Wait::mbarrier:
    case Wait::spin: {
      const Mbarrier& m = block.mbarriers.at(t.wait_bar);
      return std::string(t.wait == Wait::spin ? "spins on mbarrier.try_wait" : "waits on mbarrier") + " " +
             hex(t.wait_bar) + " for parity " + std::to_string(t.wait_parity) + at + ": phase " +
             std::to_string(m.phase) + " still needs " + std::to_string(m.pending) + " of " + std::to_string(m.count) +
             " arrivals and " + std::to_string(m.tx) + " transaction bytes, and no TMA copy in flight will bring them";
    }
  }
  return "";
}

void check_exit_state(Block& block) {
  for (Thread& t : block.threads) {
    AsThread as(t);
    if (!t.wgmma_open.empty() || !t.wgmma_committed.empty()) {
      block.fail("the kernel exits with wgmma operations in flight (no wgmma.wait_group retired them)");
    }
    if (!t.store_open.empty() || !t.store_committed.empty()) {
      block.fail_at(t.store_open.empty() ? t.store_committed.front().front() : t.store_open.front(),
                    "the kernel exits while a TMA store still reads shared memory (no cp.async.bulk.wait_group.read)");
    }
  }
  current_thread = nullptr;
  for (const auto& entry : block.mbarriers) {
    const Mbarrier& m = entry.second;
    if (!m.queued.empty()) {
      block.fail_at(entry.first, "the kernel exits with a TMA load (issued by thread " +
                                     std::to_string(m.queued.front().thread) + " at " + where(m.queued.front().site) +
                                     ") still completing on this mbarrier");
    }
    if (m.tx != 0) {
      block.fail_at(entry.first, "the kernel exits while phase " + std::to_string(m.phase) + " of this mbarrier has " +
                                     std::to_string(m.tx) + " transaction bytes outstanding");
    }
  }
  int total = 0;
  for (std::size_t g = 0; g < block.warpgroups.size(); ++g) {
    const int regs = block.warpgroup_registers[g] != 0 ? block.warpgroup_registers[g] : entry_registers(block);
    const std::size_t threads = std::min<std::size_t>(128, block.threads.size() - g * 128);
    total += regs * static_cast<int>(threads);
  }
  if (total > 65536) {
    block.fail("setmaxnreg: the warpgroups hold " + std::to_string(total) +
               " registers together, more than the multiprocessor's 65536");
  }
}

void check_async_read(Block& block, int thread, std::uint32_t address, const char* access, const Site& site,
                      int swizzle) {
  ShadowChunk& c = block.chunk_for(address, access, site);
  const std::string who = std::string(access) + " at " + where(site) + " (thread " + std::to_string(thread) + ")";
  if (c.tma_thread >= 0) {
    block.fail_at(address, who + " reads a TMA box still in flight (issued by thread " + std::to_string(c.tma_thread) +
                               ", completing on mbarrier " + hex(c.tma_bar) +
                               "): it lands only when that mbarrier's transaction completes");
  }
  if (c.landed) {
    const Thread& reader = block.threads[static_cast<std::size_t>(thread)];
    const auto it = reader.observed.find(c.landed_bar);
    const std::int64_t seen = it == reader.observed.end() ? -2 : it->second;
    if (seen < c.landed_phase && reader.sync_serial <= c.landed_serial) {
      block.fail_at(address, who + " reads a TMA box that completed phase " + std::to_string(c.landed_phase) +
                                 " of mbarrier " + hex(c.landed_bar) +
                                 ", a phase this thread never waited for (wrong parity, or no wait)");
    }
    if (swizzle >= 0 && swizzle != c.landed_swizzle) {
      block.fail_at(address, who + " reads with swizzle mode " + std::to_string(swizzle) +
                                 " (descriptor encoding) a box its tensor map stored with mode " +
                                 std::to_string(c.landed_swizzle) + ": the tensor map and the descriptor disagree");
    }
  }
  if (c.unfenced_writer >= 0) {
    block.fail_at(address, who + " reads through the async proxy what thread " + std::to_string(c.unfenced_writer) +
                               " wrote with a generic store at " + where(c.unfenced_site) +
                               " and no fence.proxy.async after it");
  }
  if (c.writer >= 0 && c.writer != thread && c.write_epoch == block.epoch) {
    block.fail_at(address,
                  who + " reads what thread " + std::to_string(c.writer) + " wrote with no barrier in between");
  }
}

void check_overwrite(Block& block, std::uint32_t address, const char* access, const Site& site) {
  ShadowChunk& c = block.chunk_for(address, access, site);
  const std::string who = std::string(access) + " at " + where(site);
  if (c.mbarrier) block.fail_at(address, who + " overwrites an mbarrier object");
  if (c.tma_thread >= 0) {
    block.fail_at(address,
                  who + " writes where a TMA load by thread " + std::to_string(c.tma_thread) + " is still in flight");
  }
  const Thread* writer = current_thread;
  const std::uint64_t retired = c.wgmma_warpgroup < 0 ? 0
                                : writer != nullptr && writer->linear / 128 == c.wgmma_warpgroup
                                    ? writer->wgmma_groups - writer->wgmma_committed.size()
                                    : block.warpgroup_retired[static_cast<std::size_t>(c.wgmma_warpgroup)];
  if (c.wgmma_warpgroup >= 0 && retired <= c.wgmma_group) {
    block.fail_at(address, who + " overwrites an operand that a wgmma of warpgroup " +
                               std::to_string(c.wgmma_warpgroup) +
                               " still reads (before the wgmma.wait_group that retires it)");
  }
  if (c.store_thread >= 0) {
    const Thread& owner = block.threads[static_cast<std::size_t>(c.store_thread)];
    if (c.store_group >= owner.store_groups - owner.store_committed.size()) {
      block.fail_at(address, who + " overwrites a chunk that a TMA store of thread " + std::to_string(c.store_thread) +
                                 " still reads (before its cp.async.bulk.wait_group.read)");
    }
  }
}

}  // namespace mla::simt
