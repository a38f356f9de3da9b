// The emulator's per-block state, shared by the scheduler (emulator.cpp) and
// the instruction semantics (warp_ops.cpp). Internal to backends/simt.
#pragma once

#include <boost/context/fiber.hpp>
#include <cstdint>
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include "emulator.hpp"

namespace mla::simt {

inline constexpr std::uint32_t chunk_bytes = 16;
// All ones: NaN in fp32, fp16 and bf16, and in fp8 e4m3.
inline constexpr unsigned char poison_byte = 0xff;
// Largest per-lane operand of a collective (an MFMA: 64 accumulator bytes + 16 operand bytes).
inline constexpr std::size_t max_collective_bytes = 96;

enum class Wait { ready, barrier, warp, done };

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
// reads each lane's `in`, writes each lane's `out`.
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

// A warp-wide operation: `in` is this lane's operand, `out` receives its result.
void collective(const char* op, Site site, const void* in, std::size_t in_bytes, void* out, std::size_t out_bytes,
                CollectiveFn compute);

}  // namespace mla::simt
