// One core's fp32 FMA throughput, measured rather than read off a data sheet.
#pragma once

#include <string>

namespace mla::bench {

struct FmaPeak {
  std::string isa;           // widest FMA instruction set the CPU runs: "avx512f", "avx2+fma", "none"
  int lanes = 0;             // fp32 lanes per FMA instruction
  double gflops = 0.0;       // measured: 2 flops per lane per FMA
  double cpuinfo_mhz = 0.0;  // "cpu MHz" of /proc/cpuinfo (0 when absent)
  std::string cpu_model;     // "model name" of /proc/cpuinfo
};

// Runs independent FMA chains (enough to cover latency x pipes) for about
// `seconds` of thread CPU time and reports the best of three runs.
FmaPeak measure_fma_peak(double seconds = 0.3);

// The same for AVX512-BF16's vdpbf16ps (bf16 pair products summed into fp32
// lanes), in GFLOP/s counting 2 flops per product; 0 when the CPU lacks it.
double measure_bf16_dot_peak(double seconds = 0.3);

}  // namespace mla::bench
