// The emulator's cost counters (cost.hpp): per block while it runs, summed
// per kernel name when the launch ends.
#include "simt/cost.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "block.hpp"

namespace mla::simt {
namespace {

std::atomic<bool> counting{false};
std::mutex costs_mutex;
std::map<std::string, KernelCost> costs;

constexpr unsigned phase_bytes = 128;
constexpr unsigned banks = 32;
constexpr unsigned bank_bytes = 4;
constexpr unsigned sector_bytes = 32;
constexpr unsigned global_site_bit = 1u << 31;

// Threads in `t`'s warp (the last warp of a block may be partial).
int warp_threads(const Block& block, const Thread& t) {
  return std::min(block.config->warp_size, static_cast<int>(block.threads.size()) - t.warp * block.config->warp_size);
}

// Distinct 32-byte sectors of one warp-wide global request.
std::uint64_t sectors(const std::vector<std::uintptr_t>& addresses, unsigned bytes) {
  std::vector<std::uintptr_t> touched;
  for (const std::uintptr_t a : addresses) {
    if (a == 0) continue;  // a lane that read nothing
    for (std::uintptr_t s = a / sector_bytes; s <= (a + bytes - 1) / sector_bytes; ++s) touched.push_back(s);
  }
  std::sort(touched.begin(), touched.end());
  return static_cast<std::uint64_t>(std::unique(touched.begin(), touched.end()) - touched.begin());
}

Block* counting_block() { return counting.load(std::memory_order_relaxed) ? current_block : nullptr; }

void add_access(Block& block, const std::vector<std::pair<int, std::uint32_t>>& accesses, unsigned bytes_each) {
  const auto [phases, wavefronts] = bank_wavefronts(accesses, bytes_each);
  block.cost.shared_phases += phases;
  block.cost.shared_wavefronts += wavefronts;
}

}  // namespace

KernelCost& KernelCost::operator+=(const KernelCost& other) {
  launches += other.launches;
  blocks += other.blocks;
  tensor_flops += other.tensor_flops;
  shared_phases += other.shared_phases;
  shared_wavefronts += other.shared_wavefronts;
  global_read_bytes += other.global_read_bytes;
  global_sectors += other.global_sectors;
  exps += other.exps;
  barriers += other.barriers;
  return *this;
}

void set_cost_counting(bool on) { counting.store(on, std::memory_order_relaxed); }
bool cost_counting() { return counting.load(std::memory_order_relaxed); }

std::map<std::string, KernelCost> kernel_costs() {
  const std::lock_guard<std::mutex> lock(costs_mutex);
  return costs;
}

void reset_kernel_costs() {
  const std::lock_guard<std::mutex> lock(costs_mutex);
  costs.clear();
}

std::pair<unsigned, unsigned> bank_wavefronts(const std::vector<std::pair<int, std::uint32_t>>& accesses,
                                              unsigned bytes_each) {
  const unsigned lanes_per_phase = phase_bytes / std::max(bytes_each, bank_bytes);
  std::map<int, std::vector<std::uint32_t>> by_phase;  // phase -> words
  for (const auto& [lane, address] : accesses) {
    auto& words = by_phase[lane / static_cast<int>(lanes_per_phase)];
    for (unsigned w = 0; w < std::max(bytes_each / bank_bytes, 1u); ++w) words.push_back(address / bank_bytes + w);
  }
  unsigned phases = 0, wavefronts = 0;
  for (auto& [phase, words] : by_phase) {
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    unsigned per_bank[banks] = {};
    for (const std::uint32_t word : words) ++per_bank[word % banks];
    ++phases;
    wavefronts += *std::max_element(per_bank, per_bank + banks);
  }
  return {phases, wavefronts};
}

void count_exp() {
  if (Block* block = counting_block()) ++block->cost.exps;
}
void count_tensor_flops(std::uint64_t flops) {
  if (Block* block = counting_block()) block->cost.tensor_flops += flops;
}
void count_global_read(std::uint64_t bytes) {
  if (Block* block = counting_block()) {
    block->cost.global_read_bytes += bytes;
    block->cost.global_sectors += (bytes + sector_bytes - 1) / sector_bytes;
  }
}

void count_global_lane_read(const void* address, unsigned bytes, const char* file, unsigned line) {
  Block* block = counting_block();
  if (block == nullptr) return;
  Thread& t = *current_thread;
  if (address != nullptr) block->cost.global_read_bytes += bytes;
  // Counted apart from the site's shared accesses: a cp.async that reads
  // nothing (zero fill) still writes shared memory.
  const std::uint64_t visit = t.site_visits[{file, line | global_site_bit}]++;
  const LaneGroupKey key{t.warp, file, line, visit, bytes};
  auto& group = block->global_lane_groups[key];
  group.push_back(address != nullptr ? reinterpret_cast<std::uintptr_t>(address) : 0);
  if (static_cast<int>(group.size()) == warp_threads(*block, t)) {
    block->cost.global_sectors += sectors(group, bytes);
    block->global_lane_groups.erase(key);
  }
}
void count_barrier() {
  if (Block* block = counting_block()) ++block->cost.barriers;
}
void count_shared_bytes(std::uint64_t bytes) {
  if (Block* block = counting_block()) {
    const std::uint64_t wavefronts = (bytes + phase_bytes - 1) / phase_bytes;
    block->cost.shared_phases += wavefronts;
    block->cost.shared_wavefronts += wavefronts;
  }
}
void count_shared_access(const std::vector<std::pair<int, std::uint32_t>>& accesses, unsigned bytes_each) {
  if (Block* block = counting_block()) add_access(*block, accesses, bytes_each);
}

void count_shared_lane_access(std::uint32_t address, unsigned bytes_each, const char* file, unsigned line) {
  Block* block = counting_block();
  if (block == nullptr) return;
  Thread& t = *current_thread;
  const std::uint64_t visit = t.site_visits[{file, line}]++;
  auto& group = block->lane_groups[{t.warp, file, line, visit, bytes_each}];
  group.emplace_back(t.lane, address);
  if (static_cast<int>(group.size()) == warp_threads(*block, t)) {
    add_access(*block, group, bytes_each);
    block->lane_groups.erase({t.warp, file, line, visit, bytes_each});
  }
}

void flush_block_cost(Block& block) {
  // Groups some lanes never joined (a predicated-off copy): what did arrive.
  for (const auto& [key, group] : block.lane_groups) add_access(block, group, key.bytes_each);
  block.lane_groups.clear();
  for (const auto& [key, group] : block.global_lane_groups) block.cost.global_sectors += sectors(group, key.bytes_each);

  block.global_lane_groups.clear();
}

void merge_launch_cost(const std::string& kernel, const KernelCost& cost) {
  if (!cost_counting()) return;
  const std::lock_guard<std::mutex> lock(costs_mutex);
  costs[kernel] += cost;
}

}  // namespace mla::simt
