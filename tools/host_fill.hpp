// Host-side helpers of the commands that make or convert large inputs: a
// range split over the host's threads, and random normal values that depend
// only on a stream number and their index. At DeepSeek-V3's 128 heads and 64k
// keys a bench input holds billions of values, which one thread drawing from
// a sequential generator took more than a minute to make.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace mla::tools {

// Calls body(begin, end) on consecutive ranges that cover [0, count), each on
// its own thread (as many as the host has, fewer for small counts), and
// returns when all are done. An exception in a body is rethrown here.
void parallel_ranges(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body);

// `count` values of a normal distribution with mean 0 and deviation `scale`:
// value i is a function of (stream, i) alone (SplitMix64 and Box-Muller), so
// the result is the same for any number of threads. About 10 ns a value
// per thread (the sequential std::normal_distribution: 13).
std::vector<float> random_normal(std::int64_t count, std::uint64_t stream, float scale = 1.0f);

}  // namespace mla::tools
