// CPU prefill benchmark: KOKKOS, REFERENCE and the one-thread OpenBLAS
// attention a user would otherwise write, side by side on DeepSeek dims
// (16 heads, dqk 192, V 128), causal, fp32, random data.
//
//   mla-bench-cpu [--quick]            the table (markdown on stdout)
//   mla-bench-cpu --memory-child NAME TOKENS   (internal) one run of NAME at
//                                       TOKENS in a fresh process, for its peak RSS
//
// Timing: one warm-up run, then the median of R timed runs (R shrinks with
// the size). FLOPs as CONTRACT.md §8 counts causal prefill:
// H * (dqk + dv) * sum_i s_i^2.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "blas_attention.hpp"
#include "fma_peak.hpp"
#include "mla/mla.hpp"

namespace mla::bench {
namespace {

constexpr int kHeads = 16;
constexpr MlaDims kDims = deepseek_dims;  // dqk 192, V 128
const float kScale = 1.0f / std::sqrt(192.0f);

struct Case {
  std::string name;
  std::vector<int> lengths;  // one causal sequence each
};

double causal_flops(const std::vector<int>& lengths) {
  double sum_sq = 0.0;
  for (int s : lengths) sum_sq += static_cast<double>(s) * s;
  return kHeads * (kDims.qk_head_dim() + kDims.v_head_dim) * sum_sq;
}

// Host fp32 operands of one case.
struct Problem {
  std::vector<std::int32_t> cu;
  std::int64_t tokens = 0;
  std::vector<float> q, k, v, out;

  explicit Problem(const std::vector<int>& lengths) {
    cu.push_back(0);
    for (int s : lengths) cu.push_back(cu.back() + s);
    tokens = cu.back();
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    auto fill = [&](std::vector<float>& x, std::int64_t n) {
      x.resize(static_cast<std::size_t>(n));
      for (float& value : x) value = uniform(rng);
    };
    fill(q, tokens * kHeads * kDims.qk_head_dim());
    fill(k, tokens * kHeads * kDims.qk_head_dim());
    fill(v, tokens * kHeads * kDims.v_head_dim);
    out.assign(static_cast<std::size_t>(tokens * kHeads * kDims.v_head_dim), std::nanf(""));
  }
};

// A runnable contender: prepares once, then `run` computes problem.out.
using Runner = std::function<void()>;

Runner make_runner(const std::string& name, Problem& problem, std::unique_ptr<PrefillBackend>& keep) {
  if (name == "BLAS") {
    auto blas = std::make_shared<BlasAttention>(BlasAttention{kHeads, kDims.qk_head_dim(), kDims.v_head_dim, kScale});
    return [blas, &problem] { blas->run(problem.q.data(), problem.k.data(), problem.v.data(), problem.out.data(), problem.cu); };
  }
  BackendParams params;
  params.num_heads = kHeads;
  params.scale = kScale;
  params.dims = kDims;
  params.dtype = DType::float32;
  keep = mla_prefill_registry().resolve(mla_prefill_registry().parse(name)).factory(params);
  Queue queue = Queue::host();
  PrefillMetadata meta;
  meta.cu_seqlens_q = problem.cu;
  meta.cu_seqlens_k = problem.cu;
  meta.max_seqlen_q = meta.max_seqlen_k = max_seqlen(problem.cu);
  meta.causal = true;
  keep->prepare(queue, meta);
  PrefillBackend* backend = keep.get();
  const std::int64_t n = problem.tokens;
  return [backend, &problem, n] {
    Queue host = Queue::host();
    const TensorView q = TensorView::contiguous(problem.q.data(), DType::float32, {n, kHeads, kDims.qk_head_dim()});
    const TensorView k = TensorView::contiguous(problem.k.data(), DType::float32, {n, kHeads, kDims.qk_head_dim()});
    const TensorView v = TensorView::contiguous(problem.v.data(), DType::float32, {n, kHeads, kDims.v_head_dim});
    const TensorView out = TensorView::contiguous(problem.out.data(), DType::float32, {n, kHeads, kDims.v_head_dim});
    backend->run_new_tokens(host, q, k, v, /*return_lse=*/false, out);
    host.wait();
  };
}

double median_ms(const Runner& run, int repeats) {
  run();  // warm-up: first-touch of buffers, Kokkos scratch, BLAS buffers
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string lengths_text(const std::vector<int>& lengths) {
  std::string text;
  for (int s : lengths) text += (text.empty() ? "" : "+") + std::to_string(s);
  return text;
}

long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  }
  return -1;
}

// Child process: inputs allocated and touched, peak RSS reset, one run; prints
// "<rss before run KiB> <peak during run KiB>".
int memory_child(const std::string& name, int tokens) {
  blas_single_thread_core();
  Problem problem({tokens});
  std::unique_ptr<PrefillBackend> keep;
  Runner run = make_runner(name, problem, keep);
  const long before = status_kib("VmRSS:");
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // resets VmHWM to the current RSS
  run();
  std::printf("%ld %ld\n", before, status_kib("VmHWM:"));
  return 0;
}

struct Memory {
  long before_kib = -1, peak_kib = -1;
};

Memory measure_memory(const char* self, const std::string& name, int tokens) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    const std::string count = std::to_string(tokens);
    execl(self, self, "--memory-child", name.c_str(), count.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buffer[128] = {};
  const ssize_t got = read(fds[0], buffer, sizeof buffer - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Memory memory;
  if (got > 0) std::sscanf(buffer, "%ld %ld", &memory.before_kib, &memory.peak_kib);
  return memory;
}

int run_table(const char* self, bool quick) {
  const char* core = blas_single_thread_core();
  const FmaPeak peak = measure_fma_peak();
  std::printf("## Machine\n\n");
  std::printf("- CPU: %s, %ld online cores (the benchmark uses one)\n", peak.cpu_model.c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("- Kokkos default host execution space runs the KOKKOS backend; OpenBLAS kernel: %s, 1 thread\n\n", core);
  std::printf("## One core's FP32 FMA peak (measured)\n\n");
  std::printf("A loop of 24 independent %s FMA chains of %d lanes: %.1f GFLOP/s.\n", peak.isa.c_str(), peak.lanes,
              peak.gflops);
  if (peak.cpuinfo_mhz > 0) {
    const double per_cycle = peak.gflops * 1e3 / peak.cpuinfo_mhz;
    std::printf("At the %.0f MHz of /proc/cpuinfo that is %.1f flops/cycle = 2 flops x %d lanes x %.2f FMA "
                "instructions per cycle (2 FMA pipes give 2.00; above 2 means the core ran faster than the "
                "listed clock).\n",
                peak.cpuinfo_mhz, per_cycle, peak.lanes, per_cycle / (2.0 * peak.lanes));
  }
  std::printf("\n");

  std::vector<Case> cases = {{"causal 512", {512}},   {"causal 1024", {1024}}, {"causal 2048", {2048}},
                             {"causal 4096", {4096}}, {"causal 8192", {8192}}, {"varlen 4 seqs", {1536, 3072, 2560, 1024}}};
  if (quick) cases.resize(2);
  std::printf("## Causal prefill, fp32, H=16, dqk=192, dv=128 (median ms; GFLOP/s per CONTRACT.md §8)\n\n");
  std::printf("| case | tokens | KOKKOS ms | KOKKOS GFLOP/s | %% of peak | REFERENCE ms | REFERENCE GFLOP/s | "
              "BLAS ms | BLAS GFLOP/s | KOKKOS / BLAS | max abs diff |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    Problem problem(c.lengths);
    const double flops = causal_flops(c.lengths);
    const int repeats = problem.tokens >= 8192 ? 2 : problem.tokens >= 4096 ? 3 : 5;
    std::unique_ptr<PrefillBackend> kokkos_backend, reference_backend, unused;
    const double kokkos_ms = median_ms(make_runner("KOKKOS", problem, kokkos_backend), repeats);
    const std::vector<float> kokkos_out = problem.out;
    std::string reference_ms = "-", reference_rate = "-";
    if (problem.tokens <= 1024 && c.lengths.size() == 1) {
      const double ms = median_ms(make_runner("REFERENCE", problem, reference_backend), 1);
      reference_ms = std::to_string(static_cast<long>(std::lround(ms)));
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", flops / ms / 1e6);
      reference_rate = text;
    }
    problem.out.assign(problem.out.size(), std::nanf(""));
    const double blas_ms = median_ms(make_runner("BLAS", problem, unused), repeats);
    double max_diff = 0.0;
    for (std::size_t i = 0; i < kokkos_out.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(kokkos_out[i]) - problem.out[i]);
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    }
    const double kokkos_rate = flops / kokkos_ms / 1e6;
    const double blas_rate = flops / blas_ms / 1e6;
    std::printf("| %s (%s) | %lld | %.1f | %.1f | %.0f%% | %s | %s | %.1f | %.1f | %.2fx | %.1e |\n", c.name.c_str(),
                lengths_text(c.lengths).c_str(), static_cast<long long>(problem.tokens), kokkos_ms, kokkos_rate,
                100.0 * kokkos_rate / peak.gflops, reference_ms.c_str(), reference_rate.c_str(), blas_ms, blas_rate,
                kokkos_rate / blas_rate, max_diff);
    std::fflush(stdout);
  }

  const int memory_tokens = quick ? 1024 : 8192;
  std::printf("\n## Memory at %d tokens (one process per contender)\n\n", memory_tokens);
  std::printf("| contender | RSS with inputs and output (MiB) | peak RSS during the call (MiB) | added by the call (MiB) |\n");
  std::printf("|---|---|---|---|\n");
  for (const char* name : {"KOKKOS", "BLAS"}) {
    const Memory memory = measure_memory(self, name, memory_tokens);
    std::printf("| %s | %.1f | %.1f | %.1f |\n", name, memory.before_kib / 1024.0, memory.peak_kib / 1024.0,
                (memory.peak_kib - memory.before_kib) / 1024.0);
  }
  return 0;
}

}  // namespace
}  // namespace mla::bench

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string(argv[1]) == "--memory-child") {
      return mla::bench::memory_child(argv[2], std::atoi(argv[3]));
    }
    const bool quick = argc == 2 && std::string(argv[1]) == "--quick";
    if (argc > 1 && !quick) {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
    return mla::bench::run_table("/proc/self/exe", quick);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mla-bench-cpu: %s\n", e.what());
    return 1;
  }
}
