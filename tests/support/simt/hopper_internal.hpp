// Shared by the sm_90 emulation sources (hopper_*.cpp): the shadow-state
// checks of async-proxy reads and of writes into chunks the async engines
// still use, and TMA landing. Internal to tests/support/simt.
#pragma once

#include <cstdint>
#include <string>

#include "block.hpp"

namespace mla::simt {

// An async-proxy read (wgmma operand, TMA store source) of the chunk at
// `address` on behalf of `thread`: no TMA load may be in flight to it, a box
// that landed must have been observed (the thread saw its mbarrier phase
// complete, or passed a barrier since), a generic write must have been
// followed by fence.proxy.async; `swizzle` >= 0 must match the box's tensor map.
void check_async_read(Block& block, int thread, std::uint32_t address, const char* access, const Site& site,
                      int swizzle);

// A write into the chunk at `address` (generic store or TMA landing): it may
// not hold an mbarrier, nor be read by a wgmma or TMA store not yet retired,
// nor receive a second TMA load while one is in flight.
void check_overwrite(Block& block, std::uint32_t address, const char* access, const Site& site);

// Lands every queued TMA load of `bar`, completing transaction bytes.
void land_transfers(Block& block, std::uint32_t bar);

// Completes the current phase of `bar` when its arrivals and bytes are in.
void try_complete_phase(Block& block, std::uint32_t bar);

Mbarrier& mbarrier_at(Block& block, std::uint32_t bar, const char* access, const Site& site);

// Names a thread in messages raised while another thread computes a collective.
struct AsThread {
  explicit AsThread(Thread& thread) : saved(current_thread) { current_thread = &thread; }
  ~AsThread() { current_thread = saved; }
  AsThread(const AsThread&) = delete;
  AsThread& operator=(const AsThread&) = delete;
  Thread* saved;
};

std::string hex(std::uint64_t value);

}  // namespace mla::simt
