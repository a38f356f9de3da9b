// A SIMT emulator that runs the library's GPU kernels, unchanged in their
// logic, on the CPU: one cooperative fiber per GPU thread, blocks one after
// another on the calling thread. Built only for tests (MLA_WITH_GPU_EMULATOR).
//
// It is strict where GPU kernels really go wrong, and reports the first
// problem as Error(device) naming the kernel, block, thread and address:
//   - barriers: threads of a block at different __syncthreads, a thread that
//     exited while others wait, deadlock;
//   - warp collectives (shuffles, ldmatrix, mma, MFMA): every lane of the warp
//     must arrive at the same call;
//   - cp.async: a copy lands only when the wait that retires its group runs,
//     and its destination holds poison (all ones: NaN in every float format)
//     until then;
//   - shared memory reached through 32-bit shared addresses (the CUDA kernel's
//     cp.async and ldmatrix) has a shadow state per 16-byte chunk: a read before
//     the copy's wait, a read of another thread's write before a barrier, an
//     overwrite of a chunk another thread read in the same barrier interval,
//     two copies in flight to one chunk, addresses out of range, and copies
//     still in flight when the kernel exits;
//   - global addresses of cp.async outside the ranges the launcher declares;
//   - sm_90 (simt/hopper.hpp, hopper_*.cpp): warpgroup collectives, wgmma
//     with poisoned accumulators and operands held until the retiring
//     wait_group, mbarrier phases and transaction counts, TMA boxes in flight
//     until their transaction completes, proxy fences, named barriers, and
//     deadlocks that include spinning try_waits.
// Shared memory is poisoned when each block starts; its shared addresses
// start at the declared alignment (LaunchConfig::dynamic_shared_alignment),
// never at 0, so a kernel relying on more alignment than it declares fails. What it cannot see: plain
// C++ loads and stores (the HIP kernel's LDS accesses, global loads and the
// epilogues' stores); for those, poison plus a second schedule (warps in
// reverse order) turns a missing barrier into a wrong or NaN result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mla::simt {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// A call site in kernel source, from __builtin_FILE/__builtin_LINE default arguments.
struct Site {
  const char* file = "";
  unsigned line = 0;
};

// Order in which the scheduler resumes the threads of a block.
enum class Schedule { forward, reverse };

struct MemoryRange {
  const void* begin = nullptr;
  std::size_t bytes = 0;
  std::string what;  // "q", "k", ... for messages
};

// Size for a kernel's extern __shared__ anchor when the kernel forms pointers
// into the array (sm_90 kernels: mbarriers, tiles): the most dynamic shared
// memory a Hopper block may have, so that the host compiler sees the pointer
// arithmetic in bounds. The bytes are never touched.
inline constexpr std::size_t shared_anchor_bytes = 227 * 1024;

struct LaunchConfig {
  std::string kernel;  // name for messages
  Dim3 grid;
  Dim3 block;
  int warp_size = 32;
  std::size_t dynamic_shared_bytes = 0;
  // The kernel's extern __shared__ array as the host compiler sees it: an
  // anchor object whose address stands for shared address 0.
  const void* dynamic_shared_symbol = nullptr;
  // The alignment the kernel declares for that array (__align__ on the
  // extern __shared__ declaration). The emulator places the array at exactly
  // this alignment, no more (shared address = the alignment itself).
  std::size_t dynamic_shared_alignment = 16;
  // Registers per thread at entry (the cap __launch_bounds__ or -maxrregcount
  // gives); 0: 64K / threads, rounded down to a multiple of 8. setmaxnreg checks
  // its requests against it.
  int registers_per_thread = 0;
  // Static __shared__ storage (HIP kernels): poisoned at every block start.
  void* static_shared = nullptr;
  std::size_t static_shared_bytes = 0;
  // Where cp.async may read; empty: not checked.
  std::vector<MemoryRange> global_reads;
};

// Counts of what the emulator checked, summed over every launch since the
// last reset; tests report them.
struct Statistics {
  std::uint64_t launches = 0;
  std::uint64_t blocks = 0;
  std::uint64_t shared_checks = 0;      // shadow-state checks of 16-byte shared chunks
  std::uint64_t global_checks = 0;      // cp.async source range checks
  std::uint64_t collective_checks = 0;  // lanes checked at warp collectives
  std::uint64_t barrier_checks = 0;     // threads checked at barriers
  std::uint64_t hazards_checked() const { return shared_checks + global_checks + collective_checks + barrier_checks; }
};

Statistics statistics();
void reset_statistics();
// "launches 3, blocks 12, hazard checks 123456 (shared ..., global ..., ...)".
std::string describe(const Statistics& stats);

// The schedule launches use (forward unless set); a test flips it to run a
// kernel a second way. Per calling thread.
void set_schedule(Schedule schedule);
Schedule schedule();

// Runs `kernel` once per GPU thread of the grid; returns when every block is
// done. Raises Error(device) on the first hazard, Error(invalid_argument) for
// an empty or oversized block.
void launch(const LaunchConfig& config, const std::function<void()>& kernel);

// ---- What kernel code calls (through the cuda/hip device headers) ----

const Dim3& thread_index();
const Dim3& block_index();
const Dim3& block_dim();
const Dim3& grid_dim();
int warp_size();

void sync_threads(Site site);
// __syncthreads_or: a barrier that returns nonzero when any thread of the
// block passed a nonzero predicate.
int sync_threads_or(int predicate, Site site);

// Dynamic shared memory: the 32-bit shared address of `ptr`, which must be the
// kernel's extern __shared__ array (its first byte).
std::uint32_t shared_address(const void* ptr, Site site);

// 16 bytes global -> shared, deferred until the wait that retires its group;
// `fill` false writes zeros and reads nothing.
void cp_async_16(std::uint32_t dst, const void* src, bool fill, Site site);
void cp_async_commit();
void cp_async_wait(int pending, Site site);

// ldmatrix.sync.aligned.m8n8.x{matrices}[.trans].shared.b16.
void ldmatrix(int matrices, bool trans, std::uint32_t* regs, std::uint32_t address, Site site);

// e4m3 (OCP float8_e4m3fn) only in wgmma (k32, K-major operands) and in
// mma_m16n8k32_e4m3.
enum class Element { float16, bfloat16, e4m3 };

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, d += a b.
void mma_m16n8k16(Element element, float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
                  Site site);

// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89 and newer), d += a b;
// four e4m3 values per register (simt/sm80_layout.hpp).
void mma_m16n8k32_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1, Site site);

// v_mfma_f32_32x32x8{f16,bf16_1k}: acc += A B over one wave of 64 lanes; a and
// b are 4 raw 16-bit values per lane.
void mfma_32x32x8(Element element, float (&acc)[16], const std::uint16_t (&a)[4], const std::uint16_t (&b)[4],
                  Site site);
// v_mfma_f32_32x32x4bf16 (gfx908): 2 values per lane.
void mfma_32x32x4_bf16(float (&acc)[16], const std::uint16_t (&a)[2], const std::uint16_t (&b)[2], Site site);

// v_mfma_f32_32x32x16_fp8_fp8 (gfx940-942): acc += A B, 8 fp8 values per lane
// (one 64-bit word, lowest byte first) in CDNA3's FNUZ e4m3 encoding (bias 8,
// NaN 0x80, no infinities, largest 240), which is not OCP's float8_e4m3fn.
void mfma_32x32x16_fp8(float (&acc)[16], std::uint64_t a, std::uint64_t b, Site site);

// CDNA3's FNUZ e4m3 to binary32, exactly (0x80 is NaN).
float fp8_e4m3fnuz_to_float(std::uint8_t code);

// __shfl_xor_sync / __shfl_xor on 32-bit values: every lane of the warp takes
// part (member_mask must name all of them).
std::uint32_t shfl_xor(std::uint32_t value, int lane_mask, int width, std::uint64_t member_mask, Site site);

}  // namespace mla::simt
