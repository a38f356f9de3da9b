// The tensor memory accelerator under the emulator: cp.async.bulk.tensor loads
// (queued until their mbarrier transaction can complete, the box poisoned
// meanwhile) and stores (the source marked read until the bulk wait_group),
// on the emulated tensor map, with zero fill outside the tensor and the
// swizzle of simt/sm90_layout.hpp.
#include <algorithm>
#include <cstring>
#include <string>

#include "hopper_internal.hpp"
#include "simt/hopper.hpp"
#include "simt/sm90_layout.hpp"

namespace mla::simt {
namespace {

using cuda_flash::sm90::TensorMap;

void check_map(const Block& block, const TensorMap& map, int rank, const char* access, const Site& site) {
  if (reinterpret_cast<std::uintptr_t>(&map) % 64 != 0 || map.magic != TensorMap::valid_magic) {
    block.fail(std::string(access) + " at " + where(site) + " with a tensor map make_tensor_map did not build");
  }
  if (rank != map.rank) {
    block.fail(std::string(access) + " at " + where(site) + " gives " + std::to_string(rank) +
               " coordinates for a rank-" + std::to_string(map.rank) + " tensor map");
  }
}

// Shared-memory placement of a box: alignment, swizzle row width, bounds.
std::uint32_t check_box(Block& block, const TensorMap& map, std::uint32_t smem, const char* access, const Site& site) {
  const int mode = map.swizzle;
  const unsigned span = sm90_layout::swizzle_span(mode);
  const std::string who = std::string(access) + " at " + where(site);
  if (smem % 128 != 0) block.fail_at(smem, who + ": the shared box must be 128-byte aligned");
  if (span != 0 && smem % sm90_layout::swizzle_repeat(mode) != 0) {
    block.fail_at(smem, who + ": a " + std::to_string(span) + "-byte swizzled box must start on its " +
                            std::to_string(sm90_layout::swizzle_repeat(mode)) +
                            "-byte swizzle repeat (is the dynamic shared array declared with that alignment?)");
  }
  const std::uint32_t row = map.box[0] * static_cast<std::uint32_t>(map.element_bytes);
  if (span != 0 && row != span) {
    block.fail(who + ": a box row of " + std::to_string(row) + " bytes under a " + std::to_string(span) +
               "-byte swizzle is not emulated (rows must fill the span)");
  }
  std::uint32_t bytes = static_cast<std::uint32_t>(map.element_bytes);
  for (int d = 0; d < map.rank; ++d) bytes *= map.box[d];
  if (smem < block.shared_base || smem - block.shared_base + bytes > block.shared.size()) {
    block.fail_at(smem, who + ": the " + std::to_string(bytes) + "-byte box does not fit in dynamic shared memory");
  }
  return bytes;
}

// Calls f(shared byte offset of the element within the box, after swizzle;
// global address or null when outside the tensor) for every box element.
template <class F>
void for_each_element(const TensorMap& map, std::uint32_t smem, const int* coords, F&& f) {
  const auto elem = static_cast<std::uint32_t>(map.element_bytes);
  std::uint64_t count = 1;
  for (int d = 0; d < map.rank; ++d) count *= map.box[d];
  for (std::uint64_t linear = 0; linear < count; ++linear) {
    std::uint64_t rest = linear;
    bool inside = true;
    std::uint64_t offset = 0;
    for (int d = 0; d < map.rank; ++d) {
      const std::int64_t g = coords[d] + static_cast<std::int64_t>(rest % map.box[d]);
      rest /= map.box[d];
      if (g < 0 || static_cast<std::uint64_t>(g) >= map.dims[d]) inside = false;
      offset += static_cast<std::uint64_t>(g) * (d == 0 ? elem : map.strides_bytes[d - 1]);
    }
    const std::uint32_t logical = smem + static_cast<std::uint32_t>(linear) * elem;
    const std::uint32_t physical = sm90_layout::swizzle_address(logical, map.swizzle);
    f(physical - smem, inside ? static_cast<const unsigned char*>(map.base) + offset : nullptr);
  }
}

}  // namespace

void prefetch_tensor_map(const TensorMap& map, Site site) {
  check_map(*current_block, map, map.rank, "prefetch.tensormap", site);
}

void tma_load(std::uint32_t dst, const TensorMap& map, std::uint32_t bar, const int* coords, int rank, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  check_map(block, map, rank, "cp.async.bulk.tensor load", site);
  Mbarrier& m = mbarrier_at(block, bar, "cp.async.bulk.tensor load", site);
  if (!m.fenced) {
    block.fail_at(bar, "cp.async.bulk.tensor load at " + where(site) + " completes on an mbarrier that thread " +
                           std::to_string(m.init_thread) + " initialised at " + where(m.init_site) +
                           " without fence.mbarrier_init (or fence.proxy.async) after it: the async proxy may not see "
                           "the initialisation");
  }
  const std::uint32_t bytes = check_box(block, map, dst, "cp.async.bulk.tensor load", site);
  count_global_read(bytes);
  count_shared_bytes(bytes);
  TmaTransfer transfer;
  transfer.dst = dst;
  transfer.bytes.assign(bytes, 0);
  transfer.swizzle = map.swizzle;
  transfer.thread = t.linear;
  transfer.site = site;
  const auto elem = static_cast<std::size_t>(map.element_bytes);
  for_each_element(map, dst, coords, [&](std::uint32_t offset, const unsigned char* global) {
    if (global != nullptr) std::memcpy(transfer.bytes.data() + offset, global, elem);
  });
  for (std::uint32_t a = dst; a < dst + bytes; a += chunk_bytes) {
    check_overwrite(block, a, "cp.async.bulk.tensor load", site);
    ShadowChunk& c = block.shadow_of(a);
    c.tma_thread = t.linear;
    c.tma_bar = bar;
    c.landed = false;
    c.unfenced_writer = -1;
    c.writer = -1;
  }
  std::memset(block.bytes(dst), poison_byte, bytes);
  m.queued.push_back(std::move(transfer));
  ++block.activity;
}

void land_transfers(Block& block, std::uint32_t bar) {
  Mbarrier& m = block.mbarriers.at(bar);
  std::vector<TmaTransfer> queued;
  queued.swap(m.queued);
  for (const TmaTransfer& transfer : queued) {
    std::memcpy(block.bytes(transfer.dst), transfer.bytes.data(), transfer.bytes.size());
    const auto size = static_cast<std::uint32_t>(transfer.bytes.size());
    ++block.serial;
    for (std::uint32_t a = transfer.dst; a < transfer.dst + size; a += chunk_bytes) {
      ShadowChunk& c = block.shadow_of(a);
      c.tma_thread = -1;
      c.landed = true;
      c.landed_bar = bar;
      c.landed_phase = m.phase;
      c.landed_serial = block.serial;
      c.landed_swizzle = transfer.swizzle;
    }
    m.tx -= static_cast<std::int64_t>(size);
    ++block.activity;
    if (m.pending == 0 && m.tx < 0) {
      AsThread as(block.threads[static_cast<std::size_t>(transfer.thread)]);
      block.fail_at(bar, "the TMA box of " + std::to_string(size) + " bytes issued at " + where(transfer.site) +
                             " completes " + std::to_string(-m.tx) + " bytes more than phase " +
                             std::to_string(m.phase) +
                             " of this mbarrier expects (transaction-count underflow: expect_tx is short)");
    }
  }
}

void tma_store(const TensorMap& map, std::uint32_t src, const int* coords, int rank, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  check_map(block, map, rank, "cp.async.bulk.tensor store", site);
  const std::uint32_t bytes = check_box(block, map, src, "cp.async.bulk.tensor store", site);
  for (std::uint32_t a = src; a < src + bytes; a += chunk_bytes) {
    check_async_read(block, t.linear, a, "cp.async.bulk.tensor store", site, -1);
    ShadowChunk& c = block.shadow_of(a);
    c.store_thread = t.linear;
    c.store_group = t.store_groups;
    t.store_open.push_back(a);
  }
  const auto elem = static_cast<std::size_t>(map.element_bytes);
  for_each_element(map, src, coords, [&](std::uint32_t offset, const unsigned char* global) {
    if (global != nullptr) std::memcpy(const_cast<unsigned char*>(global), block.bytes(src + offset), elem);
  });
  ++block.activity;
}

void tma_store_commit(Site) {
  Thread& t = *current_thread;
  t.store_committed.push_back(std::move(t.store_open));
  t.store_open.clear();
  ++t.store_groups;
}

void tma_store_wait(int pending, Site site) {
  Block& block = *current_block;
  Thread& t = *current_thread;
  if (pending < 0) block.fail("cp.async.bulk.wait_group at " + where(site) + " with a negative count");
  while (t.store_committed.size() > static_cast<std::size_t>(pending)) {
    const std::uint64_t group = t.store_groups - t.store_committed.size();
    for (const std::uint32_t a : t.store_committed.front()) {
      ShadowChunk& c = block.shadow_of(a);
      if (c.store_thread == t.linear && c.store_group == group) c.store_thread = -1;
    }
    t.store_committed.pop_front();
  }
  ++block.activity;
}

}  // namespace mla::simt
