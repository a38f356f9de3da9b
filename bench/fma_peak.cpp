// The peak loop is compiled once per instruction set with GCC/Clang target
// attributes and picked at run time, so the number is the CPU's own peak
// whatever flags the rest of the benchmark was built with.
#include "fma_peak.hpp"

#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace mla::bench {
namespace {

// 12 independent accumulators of one vector register each: more than the
// 2 pipes x 4 cycles of FMA latency of current cores, few enough to stay in
// registers (12 of the 16 ymm / 32 zmm). Written as 12 statements on GCC
// vector types so the compiler can neither interchange the loops (which
// turns them into one long dependency chain) nor spill the accumulators.
// This file is compiled with -ffp-contract=fast, so a * m + s is one FMA.
#define MLA_FMA_LOOP(Vec)                                                        \
  Vec a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, m, s;                    \
  for (std::size_t l = 0; l < sizeof(Vec) / sizeof(float); ++l) {                \
    m[l] = mul;                                                                  \
    s[l] = seed;                                                                 \
  }                                                                              \
  /* distinct starts, or the compiler merges identical chains */                 \
  a0 = s;                                                                        \
  a1 = a0 + s;                                                                   \
  a2 = a1 + s;                                                                   \
  a3 = a2 + s;                                                                   \
  a4 = a3 + s;                                                                   \
  a5 = a4 + s;                                                                   \
  a6 = a5 + s;                                                                   \
  a7 = a6 + s;                                                                   \
  a8 = a7 + s;                                                                   \
  a9 = a8 + s;                                                                   \
  a10 = a9 + s;                                                                  \
  a11 = a10 + s;                                                                 \
  for (long i = 0; i < iterations; ++i) {                                        \
    a0 = a0 * m + s;                                                             \
    a1 = a1 * m + s;                                                             \
    a2 = a2 * m + s;                                                             \
    a3 = a3 * m + s;                                                             \
    a4 = a4 * m + s;                                                             \
    a5 = a5 * m + s;                                                             \
    a6 = a6 * m + s;                                                             \
    a7 = a7 * m + s;                                                             \
    a8 = a8 * m + s;                                                             \
    a9 = a9 * m + s;                                                             \
    a10 = a10 * m + s;                                                           \
    a11 = a11 * m + s;                                                           \
  }                                                                              \
  const Vec total = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11; \
  float sum = 0.0f;                                                              \
  for (std::size_t l = 0; l < sizeof(Vec) / sizeof(float); ++l) sum += total[l]; \
  return sum

constexpr int kChains = 12;
typedef float Vec4 __attribute__((vector_size(16)));
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f,fma"))) float fma_loop_avx512(long iterations, float mul, float seed) {
  MLA_FMA_LOOP(Vec16);
}
__attribute__((target("avx2,fma"))) float fma_loop_avx2(long iterations, float mul, float seed) { MLA_FMA_LOOP(Vec8); }
#endif
float fma_loop_plain(long iterations, float mul, float seed) { MLA_FMA_LOOP(Vec4); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The same 12 chains with vdpbf16ps: each instruction adds, per fp32 lane,
// the products of two bf16 pairs (4 flops per lane). The operands hold
// 2^-10 in every bf16 half, so the sums grow by 2^-19 per step and stay
// normal and finite.
__attribute__((target("avx512f,avx512bf16"))) float bf16_dot_loop(long iterations) {
  const std::uint32_t pair = 0x3a803a80u;  // two bf16 2^-10
  float pair_bits = 0.0f;
  std::memcpy(&pair_bits, &pair, sizeof pair_bits);
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_ps(pair_bits));
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long step = 0; step < iterations; ++step) {
    a[0] = _mm512_dpbf16_ps(a[0], x, x);
    a[1] = _mm512_dpbf16_ps(a[1], x, x);
    a[2] = _mm512_dpbf16_ps(a[2], x, x);
    a[3] = _mm512_dpbf16_ps(a[3], x, x);
    a[4] = _mm512_dpbf16_ps(a[4], x, x);
    a[5] = _mm512_dpbf16_ps(a[5], x, x);
    a[6] = _mm512_dpbf16_ps(a[6], x, x);
    a[7] = _mm512_dpbf16_ps(a[7], x, x);
    a[8] = _mm512_dpbf16_ps(a[8], x, x);
    a[9] = _mm512_dpbf16_ps(a[9], x, x);
    a[10] = _mm512_dpbf16_ps(a[10], x, x);
    a[11] = _mm512_dpbf16_ps(a[11], x, x);
  }
  __m512 total = a[0];
  for (int i = 1; i < kChains; ++i) total = _mm512_add_ps(total, a[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}
#endif

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "";
}

// Thread CPU time, so time slices taken by other processes do not count.
double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

double measure_bf16_dot_peak(double seconds) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx512bf16")) return 0.0;
  // Called through a volatile pointer: the loop has no side effects, so a
  // direct call with the same count may be computed once for all runs.
  float (*volatile loop)(long) = bf16_dot_loop;
  long iterations = 1000;
  volatile float sink = 0.0f;
  for (;;) {
    const double t0 = cpu_seconds();
    sink = sink + loop(iterations);
    if (cpu_seconds() - t0 > seconds / 4) break;
    iterations *= 4;
  }
  double best = 0.0;
  for (int run = 0; run < 3; ++run) {
    const double t0 = cpu_seconds();
    sink = sink + loop(iterations);
    const double elapsed = cpu_seconds() - t0;
    best = std::max(best, 4.0 * 16 * kChains * static_cast<double>(iterations) / elapsed / 1e9);
  }
  return best;
#else
  (void)seconds;
  return 0.0;
#endif
}

FmaPeak measure_fma_peak(double seconds) {
  FmaPeak peak;
  float (*loop)(long, float, float) = fma_loop_plain;
  peak.isa = "none (plain multiply-add)";
  peak.lanes = 4;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    loop = fma_loop_avx512;
    peak.isa = "avx512f";
    peak.lanes = 16;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    loop = fma_loop_avx2;
    peak.isa = "avx2+fma";
    peak.lanes = 8;
  }
#endif
  // Calibrate the iteration count to the requested time, then keep the best.
  long iterations = 1000;
  volatile float sink = 0.0f;
  for (;;) {
    const double t0 = cpu_seconds();
    sink = sink + loop(iterations, 0.99999f, 0.001f);
    const double elapsed = cpu_seconds() - t0;
    if (elapsed > seconds / 4) break;
    iterations *= 4;
  }
  for (int run = 0; run < 3; ++run) {
    const double t0 = cpu_seconds();
    sink = sink + loop(iterations, 0.99999f, 0.001f);
    const double elapsed = cpu_seconds() - t0;
    const double flops = 2.0 * kChains * peak.lanes * static_cast<double>(iterations);
    if (flops / elapsed / 1e9 > peak.gflops) peak.gflops = flops / elapsed / 1e9;
  }
  const std::string mhz = cpuinfo_field("cpu MHz");
  peak.cpuinfo_mhz = mhz.empty() ? 0.0 : std::stod(mhz);
  peak.cpu_model = cpuinfo_field("model name");
  return peak;
}

}  // namespace mla::bench
