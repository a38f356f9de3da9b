#include "host_fill.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <numbers>
#include <thread>

namespace mla::tools {
namespace {

// Below this many values per thread, starting threads costs more than it saves.
constexpr std::int64_t min_values_per_thread = 1 << 16;

// SplitMix64's output function: a bijective mix of one 64-bit counter.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform float in (0, 1] from 24 bits.
float unit(std::uint32_t bits) { return static_cast<float>((bits >> 8) + 1) * 0x1.0p-24f; }

}  // namespace

void parallel_ranges(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (count <= 0) return;
  const std::int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t threads = std::clamp<std::int64_t>(count / min_values_per_thread, 1, hardware);
  if (threads == 1) return body(0, count);
  std::exception_ptr failure;
  std::mutex failure_mutex;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (std::int64_t t = 0; t < threads; ++t) {
    const std::int64_t begin = count * t / threads;
    const std::int64_t end = count * (t + 1) / threads;
    pool.emplace_back([&, begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<float> random_normal(std::int64_t count, std::uint64_t stream, float scale) {
  std::vector<float> values(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  const std::uint64_t offset = mix(stream);
  // Values 2m and 2m + 1 are the two normals of one Box-Muller draw whose
  // two uniforms are the halves of counter m's 64 random bits.
  const auto draw = [offset](std::int64_t m, float& even, float& odd) {
    const std::uint64_t bits = mix(offset + static_cast<std::uint64_t>(m));
    const float radius = std::sqrt(-2.0f * std::log(unit(static_cast<std::uint32_t>(bits))));
    const float angle = 2.0f * std::numbers::pi_v<float> * unit(static_cast<std::uint32_t>(bits >> 32));
    even = radius * std::cos(angle);
    odd = radius * std::sin(angle);
  };
  parallel_ranges(count, [&](std::int64_t begin, std::int64_t end) {
    float even = 0.0f;
    float odd = 0.0f;
    std::int64_t i = begin;
    if (i % 2 != 0) {  // the range starts with the second value of a draw
      draw(i / 2, even, odd);
      values[static_cast<std::size_t>(i++)] = odd * scale;
    }
    for (; i < end; i += 2) {
      draw(i / 2, even, odd);
      values[static_cast<std::size_t>(i)] = even * scale;
      if (i + 1 < end) values[static_cast<std::size_t>(i + 1)] = odd * scale;
    }
  });
  return values;
}

}  // namespace mla::tools
