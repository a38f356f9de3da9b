// wgmma.mma_async and stmatrix under the emulator. A wgmma reads its operands
// through the matrix descriptors (simt/sm90_layout.hpp) when the warpgroup
// issues it, marks the shared chunks it read until the wait_group that retires
// its group, and leaves poison in the accumulators until then; the value lands
// at that wait.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "hopper_internal.hpp"
#include "mla/detail/numeric.hpp"
#include "simt/hopper.hpp"
#include "simt/sm90_layout.hpp"

namespace mla::simt {
namespace {

constexpr int max_accumulators = 128;

struct WgmmaArg {
  Element element;
  int n;
  bool trans_b;
  const std::uint32_t* a_regs;
  std::uint64_t a_desc;
  std::uint64_t b_desc;
  int scale_d;
  float c[max_accumulators];       // the accumulators going in
  float result[max_accumulators];  // what they hold once retired
};

// Elements as stored: 16-bit floats, or e4m3 bytes (in the low 8 bits).
float to_float(Element element, std::uint16_t bits) {
  switch (element) {
    case Element::bfloat16:
      return numeric::bf16_to_float(bits);
    case Element::e4m3:
      return numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(bits));
    default:
      return numeric::half_to_float(bits);
  }
}

int element_bytes(Element element) { return element == Element::e4m3 ? 1 : 2; }

// The k of one wgmma: 32 bytes of each row of A and B, 16 or 32 elements.
int depth_of(Element element) { return 32 / element_bytes(element); }

// Register halves that carry the accumulator poison once rounded to bf16.
bool holds_poison(std::uint32_t reg) { return (reg & 0xffffu) == 0xffffu || (reg >> 16) == 0xffffu; }

// The latest accumulator value an unretired wgmma of `t` holds for `d`.
const PendingAccumulator* pending_for(const Thread& t, const float* d) {
  for (auto it = t.wgmma_open.rbegin(); it != t.wgmma_open.rend(); ++it) {
    if (it->d == d) return &*it;
  }
  for (auto group = t.wgmma_committed.rbegin(); group != t.wgmma_committed.rend(); ++group) {
    for (auto it = group->rbegin(); it != group->rend(); ++it) {
      if (it->d == d) return &*it;
    }
  }
  return nullptr;
}

// Reads one operand through its descriptor into values[mn][k] (depth_of k per
// mn), checking every chunk it touches and marking it read by this
// warpgroup's open group.
void read_operand(Block& block, int first, const WgmmaArg& head, std::uint64_t bits, bool mn_major, int rows,
                  float* values, const char* name) {
  const Thread& lead = block.threads[static_cast<std::size_t>(first)];
  const sm90_layout::Descriptor d = sm90_layout::decode_descriptor(bits);
  const std::string who = std::string("wgmma ") + name + " descriptor at " + where(lead.site);
  if (d.base_offset != 0) block.fail(who + ": a nonzero base offset is not emulated");
  const unsigned span = sm90_layout::swizzle_span(d.swizzle);
  if (span != 0 && d.start % sm90_layout::swizzle_repeat(d.swizzle) >= span) {
    block.fail_at(d.start, who + ": with base offset 0 a " + std::to_string(span) +
                               "-byte swizzled operand starts in the first row of a " +
                               std::to_string(sm90_layout::swizzle_repeat(d.swizzle)) + "-byte swizzle repeat");
  }
  const int bytes = element_bytes(head.element), depth = depth_of(head.element);
  if (bytes == 1 && mn_major) block.fail(who + ": 8-bit operands are K-major only (no transpose)");
  std::vector<std::uint32_t> chunks;
  for (int mn = 0; mn < rows; ++mn) {
    for (int k = 0; k < depth; ++k) {
      const std::uint32_t logical = d.start + sm90_layout::operand_offset(d, mn_major, mn, k, bytes);
      const std::uint32_t address = sm90_layout::swizzle_address(logical, d.swizzle);
      if (address < block.shared_base ||
          address - block.shared_base + static_cast<std::uint32_t>(bytes) > block.shared.size()) {
        block.fail_at(address, who + ": element (" + std::to_string(mn) + ", " + std::to_string(k) +
                                   ") lies outside dynamic shared memory");
      }
      std::uint16_t bits16 = 0;
      std::memcpy(&bits16, block.bytes(address), static_cast<std::size_t>(bytes));
      values[mn * depth + k] = to_float(head.element, bits16);
      chunks.push_back(address / chunk_bytes * chunk_bytes);
    }
  }
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  const std::string access = std::string("wgmma ") + name;
  AsThread as(block.threads[static_cast<std::size_t>(first)]);
  for (const std::uint32_t chunk : chunks) {
    check_async_read(block, first, chunk, access.c_str(), lead.site, d.swizzle);
    ShadowChunk& c = block.shadow_of(chunk);
    c.wgmma_warpgroup = first / 128;
    c.wgmma_group = lead.wgmma_groups;
  }
}

void wgmma_compute(Block& block, int first) {
  const auto& head = *static_cast<const WgmmaArg*>(block.threads[static_cast<std::size_t>(first)].arg);
  for (int i = 1; i < 128; ++i) {
    Thread& t = block.threads[static_cast<std::size_t>(first + i)];
    const auto& arg = *static_cast<const WgmmaArg*>(t.arg);
    if (arg.element != head.element || arg.n != head.n || arg.trans_b != head.trans_b ||
        (arg.a_regs == nullptr) != (head.a_regs == nullptr) || arg.b_desc != head.b_desc ||
        (head.a_regs == nullptr && arg.a_desc != head.a_desc) || arg.scale_d != head.scale_d) {
      AsThread as(t);
      block.fail("wgmma.mma_async at " + where(t.site) +
                 ": the threads of the warpgroup disagree on the shape, descriptors or scale-d");
    }
  }
  const int depth = depth_of(head.element);
  float a[64 * 32];
  float b[256 * 32];
  if (head.a_regs == nullptr) {
    read_operand(block, first, head, head.a_desc, false, 64, a, "A");
  } else {
    // Four registers per thread, each two 16-bit values (low half first) or
    // four e4m3 bytes (lowest byte first).
    const int bytes = element_bytes(head.element), per_register = 4 / bytes;
    const std::uint32_t mask = bytes == 1 ? 0xffu : 0xffffu;
    for (int i = 0; i < 128; ++i) {
      const auto& arg = *static_cast<const WgmmaArg*>(block.threads[static_cast<std::size_t>(first + i)].arg);
      for (int h = 0; h < 4 * per_register; ++h) {
        const std::uint32_t reg = arg.a_regs[h / per_register];
        const auto bits = static_cast<std::uint16_t>((reg >> (8 * bytes * (h % per_register))) & mask);
        const sm90_layout::Position p =
            bytes == 1 ? sm90_layout::a_fragment_position_k32(i, h) : sm90_layout::a_fragment_position(i, h);
        a[p.row * depth + p.col] = to_float(head.element, bits);
      }
    }
  }
  read_operand(block, first, head, head.b_desc, head.trans_b, head.n, b, "B");
  count_tensor_flops(2ull * 64 * static_cast<std::uint64_t>(head.n) * static_cast<std::uint64_t>(depth));
  // A (64 rows of 32 bytes) from shared memory unless it came from registers, B (n rows of 32 bytes) always.
  count_shared_bytes((head.a_regs == nullptr ? 64u * 32 : 0u) + static_cast<std::uint64_t>(head.n) * 32);
  for (int i = 0; i < 128; ++i) {
    auto& arg = *static_cast<WgmmaArg*>(block.threads[static_cast<std::size_t>(first + i)].arg);
    for (int r = 0; r < head.n / 2; ++r) {
      const sm90_layout::Position p = sm90_layout::accumulator_position(i, r);
      // Products of 16- and 8-bit floats are exact in double; one rounding at the end.
      double sum = head.scale_d != 0 ? static_cast<double>(arg.c[r]) : 0.0;
      for (int k = 0; k < depth; ++k) sum += static_cast<double>(a[p.row * depth + k]) * b[p.col * depth + k];
      arg.result[r] = static_cast<float>(sum);
    }
  }
}

struct StmatrixIn {
  std::uint32_t address;
  std::uint32_t regs[4];
  bool trans;
};

void stmatrix_compute(Block& block, int first) {
  const auto& head = *reinterpret_cast<const StmatrixIn*>(block.threads[static_cast<std::size_t>(first)].in);
  if (cost_counting()) {
    std::vector<std::pair<int, std::uint32_t>> rows;
    for (int lane = 0; lane < 32; ++lane) {
      rows.emplace_back(
          lane, reinterpret_cast<const StmatrixIn*>(block.threads[static_cast<std::size_t>(first + lane)].in)->address);
    }
    count_shared_access(rows, chunk_bytes);
  }
  std::uint16_t m[4][8][8];  // [matrix][row][col]
  for (int lane = 0; lane < 32; ++lane) {
    Thread& t = block.threads[static_cast<std::size_t>(first + lane)];
    const auto& in = *reinterpret_cast<const StmatrixIn*>(t.in);
    if (in.trans != head.trans) block.fail("stmatrix: lanes disagree on .trans");
    const int g = lane / 4, c = 2 * (lane % 4);
    for (int matrix = 0; matrix < 4; ++matrix) {
      const std::uint32_t reg = in.regs[matrix];
      if (holds_poison(reg)) {
        AsThread as(t);
        block.fail_at(
            in.address,
            "stmatrix at " + where(t.site) + ": register " + std::to_string(matrix) +
                " holds the accumulator poison (0xffff): a value computed from wgmma accumulators read before the "
                "wgmma.wait_group that retires them");
      }
      const auto lo = static_cast<std::uint16_t>(reg & 0xffffu), hi = static_cast<std::uint16_t>(reg >> 16);
      if (head.trans) {
        m[matrix][c][g] = lo;
        m[matrix][c + 1][g] = hi;
      } else {
        m[matrix][g][c] = lo;
        m[matrix][g][c + 1] = hi;
      }
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    Thread& t = block.threads[static_cast<std::size_t>(first + lane)];
    const auto& in = *reinterpret_cast<const StmatrixIn*>(t.in);
    AsThread as(t);
    check_overwrite(block, in.address, "stmatrix row", t.site);
    ShadowChunk& c = block.shadow_of(in.address);
    if (c.read_epoch == block.epoch && (c.many_readers || c.reader != t.linear)) {
      block.fail_at(in.address, "stmatrix at " + where(t.site) + " overwrites a chunk thread " +
                                    std::to_string(c.reader) + " read with no barrier in between");
    }
    std::memcpy(block.bytes(in.address), m[lane / 8][lane % 8], chunk_bytes);
    c.writer = t.linear;
    c.write_epoch = block.epoch;
    c.landed = false;
    c.unfenced_writer = t.linear;
    c.unfenced_site = t.site;
    t.unfenced.push_back(in.address);
  }
}

}  // namespace

void wgmma_fence(Site) {
  current_thread->wgmma_fenced = true;
  ++current_block->activity;
}

void wgmma_commit(Site) {
  Thread& t = *current_thread;
  t.wgmma_committed.push_back(std::move(t.wgmma_open));
  t.wgmma_open.clear();
  ++t.wgmma_groups;
  ++current_block->activity;
}

void wgmma_wait(int pending, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  if (pending < 0) block.fail("wgmma.wait_group at " + where(site) + " with a negative count");
  if (t.wgmma_committed.size() > static_cast<std::size_t>(pending)) {
    // The groups are still in flight while the other threads run: what they
    // do meanwhile (a refill of an operand released too early) meets them so.
    t.wait = Wait::ready;
    t.site = site;
    t.op = "wgmma.wait_group";
    yield(t);
  }
  while (t.wgmma_committed.size() > static_cast<std::size_t>(pending)) {
    std::vector<PendingAccumulator> group = std::move(t.wgmma_committed.front());
    t.wgmma_committed.pop_front();
    for (std::size_t n = 0; n < group.size(); ++n) {
      const PendingAccumulator& acc = group[n];
      // A later wgmma on the same registers chains on this value: it lands then.
      const bool chained = std::any_of(group.begin() + static_cast<std::ptrdiff_t>(n) + 1, group.end(),
                                       [&](const PendingAccumulator& later) { return later.d == acc.d; });
      if (chained || pending_for(t, acc.d) != nullptr) continue;
      for (std::size_t i = 0; i < acc.value.size(); ++i) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &acc.d[i], sizeof bits);
        if (bits != accumulator_poison) {
          block.fail("wgmma.wait_group at " + where(site) + ": accumulator " + std::to_string(i) + " (at " +
                     hex(reinterpret_cast<std::uintptr_t>(&acc.d[i])) + ") was written while its wgmma was in flight");
        }
      }
      std::memcpy(acc.d, acc.value.data(), acc.value.size() * sizeof(float));
    }
  }
  // What every thread of the warpgroup has retired: a thread outside it may
  // reuse an operand only then (a thread inside goes by its own waits).
  const std::size_t group = static_cast<std::size_t>(t.linear / 128);
  if (group < block.warpgroup_retired.size() && (group + 1) * 128 <= block.threads.size()) {
    std::uint64_t least = ~std::uint64_t{0};
    for (std::size_t i = group * 128; i < (group + 1) * 128; ++i) {
      const Thread& other = block.threads[i];
      least = std::min<std::uint64_t>(least, other.wgmma_groups - other.wgmma_committed.size());
    }
    block.warpgroup_retired[group] = least;
  }
  t.wgmma_fenced = false;
  ++block.activity;
}

void wgmma(Element element, int n, bool trans_b, float* d, const std::uint32_t* a_regs, std::uint64_t a_desc,
           std::uint64_t b_desc, int scale_d, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  if (n < 8 || n > 256 || n % 8 != 0)
    block.fail("wgmma.mma_async at " + where(site) + " with N = " + std::to_string(n));
  if (!t.wgmma_fenced) {
    block.fail("wgmma.mma_async at " + where(site) +
               " with no wgmma.fence since the warpgroup last touched its registers (or since its last wait_group)");
  }
  if (a_regs != nullptr) {
    for (int r = 0; r < 4; ++r) {
      if (holds_poison(a_regs[r])) {
        block.fail("wgmma.mma_async at " + where(site) + ": A register " + std::to_string(r) +
                   " holds the accumulator poison (0xffff): a value computed from wgmma accumulators read before "
                   "the wgmma.wait_group that retires them");
      }
    }
  }
  WgmmaArg arg{};
  arg.element = element;
  arg.n = n;
  arg.trans_b = trans_b;
  arg.a_regs = a_regs;
  arg.a_desc = a_desc;
  arg.b_desc = b_desc;
  arg.scale_d = scale_d;
  const int count = n / 2;
  const PendingAccumulator* chained = pending_for(t, d);
  std::memcpy(arg.c, chained != nullptr ? chained->value.data() : d, static_cast<std::size_t>(count) * sizeof(float));
  warpgroup_collective("wgmma.mma_async", site, &arg, wgmma_compute);
  PendingAccumulator acc;
  acc.d = d;
  acc.value.assign(arg.result, arg.result + count);
  t.wgmma_open.push_back(std::move(acc));
  std::fill(reinterpret_cast<std::uint32_t*>(d), reinterpret_cast<std::uint32_t*>(d) + count, accumulator_poison);
}

void stmatrix(bool trans, std::uint32_t address, const std::uint32_t (&r)[4], Site site) {
  if (address % chunk_bytes != 0) {
    current_block->fail_at(address, "stmatrix at " + where(site) + ": row address not 16-byte aligned");
  }
  StmatrixIn in{};
  in.address = address;
  std::memcpy(in.regs, r, sizeof in.regs);
  in.trans = trans;
  unsigned char out = 0;
  collective(trans ? "stmatrix.trans" : "stmatrix", site, &in, sizeof in, &out, sizeof out, stmatrix_compute);
  ++current_block->activity;
}

void load_shared_16(std::uint32_t (&r)[4], std::uint32_t address, Site site) {
  Block& block = *current_block;
  const Thread& t = *current_thread;
  if (address % chunk_bytes != 0) block.fail_at(address, "ld.shared.v4 at " + where(site) + ": not 16-byte aligned");
  block.check_read(t.linear, address, "ld.shared.v4", site);
  std::memcpy(r, block.bytes(address), sizeof r);
  ++block.activity;
}

}  // namespace mla::simt
