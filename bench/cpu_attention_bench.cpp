// CPU prefill benchmark: KOKKOS, REFERENCE and the one-thread OpenBLAS
// attention a user would otherwise write, side by side on DeepSeek dims
// (16 heads, dqk 192, V 128), causal, fp32, random data.
//
//   mla-bench-cpu [--quick | --max-tokens N]   the table (markdown on stdout);
//                                       --quick: 512 and 1024 only, memory at 1024
//   mla-bench-cpu --dtypes [--max-tokens N]   KOKKOS alone, fp32, bf16 on
//                                       each of its bf16 paths (MLA_KOKKOS_ISA
//                                       avx512_bf16 and avx512) and e4m3 inputs
//                                       (bf16 output), errors against fp64 on
//                                       sampled rows
//   mla-bench-cpu --memory-child NAME TOKENS   (internal) one run of NAME at
//                                       TOKENS in a fresh process, for its peak RSS
//
// Timing: one warm-up run, then the median of R timed runs (R shrinks with
// the size), as wall time and as the calling thread's CPU time. FLOPs as docs/contract.md §7 counts causal prefill:
// H * (dqk + dv) * sum_i s_i^2.
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
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

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "blas_attention.hpp"
#include "fma_peak.hpp"
#include "mla/backend/checks.hpp"
#include "mla/backend/registry.hpp"
#include "mla/detail/numeric.hpp"
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

std::uint16_t bf16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float bf16_value(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &wide, sizeof value);
  return value;
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

  // bf16 copies of the inputs (round to nearest even; the data has no NaN)
  // and a NaN-filled bf16 output.
  std::vector<std::uint16_t> q16, k16, v16, out16;
  void make_bf16() {
    const auto round = [](const std::vector<float>& x) {
      std::vector<std::uint16_t> y(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = bf16_bits(x[i]);
      return y;
    };
    q16 = round(q);
    k16 = round(k);
    v16 = round(v);
    out16.assign(out.size(), 0x7fc0);
  }
  // e4m3 copies of the inputs, each divided by its per-tensor descale
  // (amax / 448, as a static quantiser takes it) with saturation, and a
  // NaN-filled bf16 output (out16).
  std::vector<std::uint8_t> q8, k8, v8;
  float q_descale = 1.0f, k_descale = 1.0f, v_descale = 1.0f;
  void make_fp8() {
    const auto quantise = [](const std::vector<float>& x, float& descale) {
      float amax = 0.0f;
      for (float value : x) amax = std::max(amax, std::fabs(value));
      descale = amax > 0.0f ? amax / 448.0f : 1.0f;
      std::vector<std::uint8_t> y(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = numeric::float_to_fp8_e4m3(x[i] / descale);
      return y;
    };
    q8 = quantise(q, q_descale);
    k8 = quantise(k, k_descale);
    v8 = quantise(v, v_descale);
    out16.assign(out.size(), 0x7fc0);
  }
};

// A runnable contender: prepares once, then `run` computes problem.out.
using Runner = std::function<void()>;

Runner make_runner(const std::string& name, Problem& problem, std::unique_ptr<PrefillBackend>& keep,
                   DType dtype = DType::float32) {
  if (name == "BLAS") {
    auto blas = std::make_shared<BlasAttention>(BlasAttention{kHeads, kDims.qk_head_dim(), kDims.v_head_dim, kScale});
    return [blas, &problem] {
      blas->run(problem.q.data(), problem.k.data(), problem.v.data(), problem.out.data(), problem.cu);
    };
  }
  BackendParams params;
  params.num_heads = kHeads;
  params.dims = kDims;
  params.dtype = dtype;
  if (dtype == DType::float8_e4m3) params.out_dtype = DType::bfloat16;
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
  if (dtype == DType::float8_e4m3) {
    problem.make_fp8();
    return [backend, &problem, n] {
      Queue host = Queue::host();
      const auto view = [n](std::vector<std::uint8_t>& x, std::int64_t dim) {
        return TensorView::contiguous(x.data(), DType::float8_e4m3, {n, kHeads, dim});
      };
      const TensorView out =
          TensorView::contiguous(problem.out16.data(), DType::bfloat16, {n, kHeads, kDims.v_head_dim});
      backend->run_new_tokens(host, view(problem.q8, kDims.qk_head_dim()), view(problem.k8, kDims.qk_head_dim()),
                              view(problem.v8, kDims.v_head_dim), kScale, /*return_lse=*/false, out, std::nullopt,
                              std::nullopt, InputDescales{problem.q_descale, problem.k_descale, problem.v_descale});
      host.wait();
    };
  }
  if (dtype == DType::bfloat16) {
    problem.make_bf16();
    return [backend, &problem, n] {
      Queue host = Queue::host();
      const auto view = [n](std::vector<std::uint16_t>& x, std::int64_t dim) {
        return TensorView::contiguous(x.data(), DType::bfloat16, {n, kHeads, dim});
      };
      backend->run_new_tokens(host, view(problem.q16, kDims.qk_head_dim()), view(problem.k16, kDims.qk_head_dim()),
                              view(problem.v16, kDims.v_head_dim), kScale, /*return_lse=*/false,
                              view(problem.out16, kDims.v_head_dim));
      host.wait();
    };
  }
  return [backend, &problem, n] {
    Queue host = Queue::host();
    const TensorView q = TensorView::contiguous(problem.q.data(), DType::float32, {n, kHeads, kDims.qk_head_dim()});
    const TensorView k = TensorView::contiguous(problem.k.data(), DType::float32, {n, kHeads, kDims.qk_head_dim()});
    const TensorView v = TensorView::contiguous(problem.v.data(), DType::float32, {n, kHeads, kDims.v_head_dim});
    const TensorView out = TensorView::contiguous(problem.out.data(), DType::float32, {n, kHeads, kDims.v_head_dim});
    backend->run_new_tokens(host, q, k, v, kScale, /*return_lse=*/false, out);
    host.wait();
  };
}

// Wall time and the calling thread's CPU time of one call. Every contender
// computes on the calling thread (Kokkos Serial, OpenBLAS with one thread),
// so on a quiet core the two agree; on a shared machine the CPU time leaves
// out the time slices other processes took.
struct Timing {
  double wall_ms = 0.0;
  double cpu_ms = 0.0;
};

double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

// One warm-up call, then the medians of `repeats` timed calls.
Timing median_timing(const Runner& run, int repeats) {
  run();  // first touch of buffers, Kokkos scratch, BLAS buffers
  std::vector<double> wall, cpu;
  for (int i = 0; i < repeats; ++i) {
    const double cpu0 = thread_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(thread_cpu_ms() - cpu0);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

std::string lengths_text(const std::vector<int>& lengths) {
  // fmt::join rather than string concatenation: GCC 12 at -O3 reports a false
  // -Wrestrict on `"literal" + std::string`.
  return fmt::format("{}", fmt::join(lengths, "+"));
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

// Which variant of the KOKKOS kernel this CPU runs (MLA_KOKKOS_ISA can lower it).
std::string kokkos_kernel_info() {
  BackendParams params;
  params.num_heads = kHeads;
  params.dims = kDims;
  params.dtype = DType::float32;
  return mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).factory(params)->kernel_info();
}

int run_table(const char* self, bool quick, std::int64_t max_tokens) {
  const char* core = blas_single_thread_core();
  const FmaPeak peak = measure_fma_peak();
  std::printf("## Machine\n\n");
  std::printf("- CPU: %s, %ld online cores (the benchmark uses one)\n", peak.cpu_model.c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf(
      "- Kokkos default host execution space runs the KOKKOS backend, kernel %s; OpenBLAS kernel: %s, "
      "1 thread\n\n",
      kokkos_kernel_info().c_str(), core);
  std::printf("## One core's FP32 FMA peak (measured)\n\n");
  std::printf("A loop of 12 independent %s FMA chains of %d lanes: %.1f GFLOP/s (thread CPU time).\n", peak.isa.c_str(),
              peak.lanes, peak.gflops);
  if (peak.cpuinfo_mhz > 0) {
    const double per_cycle = peak.gflops * 1e3 / peak.cpuinfo_mhz;
    std::printf(
        "At the %.0f MHz that /proc/cpuinfo lists, that is %.1f flops/cycle = 2 flops x %d lanes x %.2f FMA "
        "instructions per cycle. A core with 2 FMA pipes (Zen 4/5, Skylake-SP and later) retires at most 2, "
        "so this one ran at about %.2f GHz (2 x %d x 2 x f = %.1f GFLOP/s).\n",
        peak.cpuinfo_mhz, per_cycle, peak.lanes, per_cycle / (2.0 * peak.lanes), peak.gflops / (2.0 * peak.lanes * 2.0),
        peak.lanes, peak.gflops);
  }
  std::printf("\n");

  std::vector<Case> cases = {{"causal 512", {512}},   {"causal 1024", {1024}},
                             {"causal 2048", {2048}}, {"causal 4096", {4096}},
                             {"causal 8192", {8192}}, {"varlen 4 seqs", {1536, 3072, 2560, 1024}}};
  if (quick) cases.resize(2);
  std::erase_if(cases, [&](const Case& c) {
    return std::accumulate(c.lengths.begin(), c.lengths.end(), std::int64_t{0}) > max_tokens;
  });
  std::printf("## Causal prefill, fp32, H=16, dqk=192, dv=128 (median ms; GFLOP/s per docs/contract.md §7)\n\n");
  std::printf(
      "Wall: median wall-clock ms. CPU: median CPU ms of the calling thread; GFLOP/s, %% of peak and the "
      "ratio use CPU time.\n\n");
  std::printf(
      "| case | tokens | KOKKOS wall / CPU ms | KOKKOS GFLOP/s | %% of peak | REFERENCE CPU ms | REFERENCE GFLOP/s | "
      "BLAS wall / CPU ms | BLAS GFLOP/s | KOKKOS / BLAS | max abs diff |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    Problem problem(c.lengths);
    const double flops = causal_flops(c.lengths);
    const int repeats = problem.tokens >= 8192 ? 2 : problem.tokens >= 4096 ? 3 : 5;
    std::unique_ptr<PrefillBackend> kokkos_backend, reference_backend, unused;
    const Timing kokkos = median_timing(make_runner("KOKKOS", problem, kokkos_backend), repeats);
    const std::vector<float> kokkos_out = problem.out;
    std::string reference_ms = "-", reference_rate = "-";
    if (problem.tokens <= 1024 && c.lengths.size() == 1) {
      const Timing reference = median_timing(make_runner("REFERENCE", problem, reference_backend), 1);
      char text[32];
      std::snprintf(text, sizeof text, "%.0f", reference.cpu_ms);
      reference_ms = text;
      std::snprintf(text, sizeof text, "%.2f", flops / reference.cpu_ms / 1e6);
      reference_rate = text;
    }
    problem.out.assign(problem.out.size(), std::nanf(""));
    const Timing blas = median_timing(make_runner("BLAS", problem, unused), repeats);
    double max_diff = 0.0;
    for (std::size_t i = 0; i < kokkos_out.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(kokkos_out[i]) - problem.out[i]);
      max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    }
    const double kokkos_rate = flops / kokkos.cpu_ms / 1e6;
    const double blas_rate = flops / blas.cpu_ms / 1e6;
    std::printf("| %s (%s) | %lld | %.1f / %.1f | %.1f | %.0f%% | %s | %s | %.1f / %.1f | %.1f | %.2fx | %.1e |\n",
                c.name.c_str(), lengths_text(c.lengths).c_str(), static_cast<long long>(problem.tokens), kokkos.wall_ms,
                kokkos.cpu_ms, kokkos_rate, 100.0 * kokkos_rate / peak.gflops, reference_ms.c_str(),
                reference_rate.c_str(), blas.wall_ms, blas.cpu_ms, blas_rate, kokkos_rate / blas_rate, max_diff);
    std::fflush(stdout);
  }

  const int memory_tokens = static_cast<int>(std::min<std::int64_t>(quick ? 1024 : 8192, max_tokens));
  std::printf("\n## Memory at %d tokens (one process per contender)\n\n", memory_tokens);
  std::printf(
      "| contender | RSS with inputs and output (MiB) | peak RSS during the call (MiB) | added by the call (MiB) |\n");
  std::printf("|---|---|---|---|\n");
  for (const char* name : {"KOKKOS", "BLAS"}) {
    const Memory memory = measure_memory(self, name, memory_tokens);
    const auto mib = [](long kib) { return static_cast<double>(kib) / 1024.0; };
    std::printf("| %s | %.1f | %.1f | %.1f |\n", name, mib(memory.before_kib), mib(memory.peak_kib),
                mib(memory.peak_kib - memory.before_kib));
  }
  return 0;
}

// Relative norm error, ||out - exact|| / ||exact||, of one run over sampled
// rows: every 61st token and each sequence's last, heads 0 and H-1, against
// attention recomputed in fp64 from the same inputs (those the run read:
// fp32, or their bf16 roundings).
enum class Inputs { fp32, bf16, fp8 };

double sampled_error(const Problem& problem, Inputs inputs) {
  const int dqk = kDims.qk_head_dim();
  const int dv = kDims.v_head_dim;
  const bool bf16_output = inputs != Inputs::fp32;
  const auto read = [&](const std::vector<float>& x, const std::vector<std::uint16_t>& x16,
                        const std::vector<std::uint8_t>& x8, float descale, std::size_t i) {
    switch (inputs) {
      case Inputs::bf16:
        return static_cast<double>(bf16_value(x16[i]));
      case Inputs::fp8:
        return static_cast<double>(numeric::fp8_e4m3_to_float(x8[i])) * descale;
      case Inputs::fp32:
        break;
    }
    return static_cast<double>(x[i]);
  };
  const auto in_q = [&](std::size_t i) { return read(problem.q, problem.q16, problem.q8, problem.q_descale, i); };
  const auto in_k = [&](std::size_t i) { return read(problem.k, problem.k16, problem.k8, problem.k_descale, i); };
  const auto in_v = [&](std::size_t i) { return read(problem.v, problem.v16, problem.v8, problem.v_descale, i); };
  double diff_sq = 0.0, ref_sq = 0.0;
  std::vector<double> scores, exact(static_cast<std::size_t>(dv));
  for (std::size_t b = 0; b + 1 < problem.cu.size(); ++b) {
    for (int t = problem.cu[b]; t < problem.cu[b + 1]; ++t) {
      if ((t - problem.cu[b]) % 61 != 0 && t != problem.cu[b + 1] - 1) continue;
      for (int h : {0, kHeads - 1}) {
        scores.clear();
        double max_score = -INFINITY;
        for (int j = problem.cu[b]; j <= t; ++j) {
          double dot = 0.0;
          for (int d = 0; d < dqk; ++d) {
            const auto qi = static_cast<std::size_t>((std::int64_t{t} * kHeads + h) * dqk + d);
            const auto ki = static_cast<std::size_t>((std::int64_t{j} * kHeads + h) * dqk + d);
            dot += in_q(qi) * in_k(ki);
          }
          scores.push_back(dot * kScale);
          max_score = std::max(max_score, dot * kScale);
        }
        double sum = 0.0;
        std::fill(exact.begin(), exact.end(), 0.0);
        for (std::size_t jj = 0; jj < scores.size(); ++jj) {
          const double p = std::exp(scores[jj] - max_score);
          sum += p;
          const std::int64_t j = problem.cu[b] + static_cast<std::int64_t>(jj);
          for (int c = 0; c < dv; ++c) {
            exact[static_cast<std::size_t>(c)] += p * in_v(static_cast<std::size_t>((j * kHeads + h) * dv + c));
          }
        }
        for (int c = 0; c < dv; ++c) {
          const auto oi = static_cast<std::size_t>((std::int64_t{t} * kHeads + h) * dv + c);
          const double got = bf16_output ? bf16_value(problem.out16[oi]) : problem.out[oi];
          const double want = exact[static_cast<std::size_t>(c)] / sum;
          diff_sq += (got - want) * (got - want);
          ref_sq += want * want;
        }
      }
    }
  }
  return std::isnan(diff_sq) ? INFINITY : std::sqrt(diff_sq / ref_sq);
}

// Sets MLA_KOKKOS_ISA for the runs in its scope (unset for nullptr) and
// restores the caller's value after.
class IsaOverride {
 public:
  explicit IsaOverride(const char* isa) {
    if (const char* old = std::getenv("MLA_KOKKOS_ISA")) saved_ = old;
    if (isa != nullptr) {
      setenv("MLA_KOKKOS_ISA", isa, 1);
    } else {
      unsetenv("MLA_KOKKOS_ISA");
    }
  }
  ~IsaOverride() {
    if (saved_) {
      setenv("MLA_KOKKOS_ISA", saved_->c_str(), 1);
    } else {
      unsetenv("MLA_KOKKOS_ISA");
    }
  }
  IsaOverride(const IsaOverride&) = delete;
  IsaOverride& operator=(const IsaOverride&) = delete;

 private:
  std::optional<std::string> saved_;
};

// KOKKOS alone on one core: fp32 (the widest variant), bf16 on the
// AVX512-BF16 path and bf16 on the AVX-512F path, with the fp32 and bf16
// dot-product peaks of the same core.
int run_dtypes(std::int64_t max_tokens) {
  const FmaPeak peak = measure_fma_peak();
  const double bf16_peak = measure_bf16_dot_peak();
  const bool has_bf16_dot = bf16_peak > 0.0;
  std::printf("## Machine\n\n");
  std::printf("- CPU: %s, %ld online cores (the benchmark uses one)\n", peak.cpu_model.c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("- KOKKOS kernel (fp32 runs): %s\n", kokkos_kernel_info().c_str());
  std::printf("- One core's peak (thread CPU time): fp32 FMA (%s) %.1f GFLOP/s; bf16 dot product (vdpbf16ps) %s\n\n",
              peak.isa.c_str(), peak.gflops,
              has_bf16_dot ? fmt::format("{:.1f} GFLOP/s", bf16_peak).c_str() : "not on this CPU");
  std::printf(
      "## KOKKOS by dtype, causal, H=16, dqk=192, dv=128, one core (median CPU ms; GFLOP/s per docs/contract.md "
      "§7)\n\n");
  std::printf(
      "Errors: relative norm error against fp64 on sampled rows (every 61st query and each sequence's last, "
      "heads 0 and 15) of the inputs the run read (fp32, their bf16 roundings, or the e4m3 bytes times their "
      "descales).\n\n");
  std::printf(
      "| case | tokens | fp32 ms | fp32 GFLOP/s | %% of FMA peak | fp32 error | bf16 avx512_bf16 ms | GFLOP/s | "
      "bf16 / fp32 | error | bf16 avx512 ms | GFLOP/s | bf16 / fp32 | error | fp8 ms | GFLOP/s | fp8 / fp32 | "
      "error |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<Case> cases = {{"causal 1024", {1024}},
                             {"causal 2048", {2048}},
                             {"causal 4096", {4096}},
                             {"causal 8192", {8192}},
                             {"varlen 4 seqs", {1536, 3072, 2560, 1024}}};
  std::erase_if(cases, [&](const Case& c) {
    return std::accumulate(c.lengths.begin(), c.lengths.end(), std::int64_t{0}) > max_tokens;
  });
  for (const Case& c : cases) {
    Problem problem(c.lengths);
    const double flops = causal_flops(c.lengths);
    const int repeats = problem.tokens >= 8192 ? 2 : problem.tokens >= 4096 ? 3 : 5;
    const auto rate = [&](const Timing& t) { return flops / t.cpu_ms / 1e6; };
    std::unique_ptr<PrefillBackend> keep;
    Timing fp32;
    {
      const IsaOverride widest(nullptr);
      fp32 = median_timing(make_runner("KOKKOS", problem, keep, DType::float32), repeats);
    }
    const double fp32_error = sampled_error(problem, Inputs::fp32);
    std::string dot_cells = "- | - | - | -";
    if (has_bf16_dot) {
      const IsaOverride dot("avx512_bf16");
      const Timing t = median_timing(make_runner("KOKKOS", problem, keep, DType::bfloat16), repeats);
      dot_cells = fmt::format("{:.1f} | {:.1f} | {:.2f}x | {:.1e}", t.cpu_ms, rate(t), fp32.cpu_ms / t.cpu_ms,
                              sampled_error(problem, Inputs::bf16));
    }
    std::string fma_cells = "- | - | - | -";
    if (std::string(peak.isa) == "avx512f") {
      const IsaOverride fma("avx512");
      problem.out16.assign(problem.out16.size(), 0x7fc0);
      const Timing t = median_timing(make_runner("KOKKOS", problem, keep, DType::bfloat16), repeats);
      fma_cells = fmt::format("{:.1f} | {:.1f} | {:.2f}x | {:.1e}", t.cpu_ms, rate(t), fp32.cpu_ms / t.cpu_ms,
                              sampled_error(problem, Inputs::bf16));
    }
    // e4m3 inputs with per-tensor descales, bf16 output: the fp32 kernel of
    // the widest ISA with its staging reading bytes (docs/contract.md §4).
    problem.out16.assign(problem.out16.size(), 0x7fc0);
    const Timing fp8 = median_timing(make_runner("KOKKOS", problem, keep, DType::float8_e4m3), repeats);
    const std::string fp8_cells = fmt::format("{:.1f} | {:.1f} | {:.2f}x | {:.1e}", fp8.cpu_ms, rate(fp8),
                                              fp32.cpu_ms / fp8.cpu_ms, sampled_error(problem, Inputs::fp8));
    std::printf("| %s (%s) | %lld | %.1f | %.1f | %.0f%% | %.1e | %s | %s | %s |\n", c.name.c_str(),
                lengths_text(c.lengths).c_str(), static_cast<long long>(problem.tokens), fp32.cpu_ms, rate(fp32),
                100.0 * rate(fp32) / peak.gflops, fp32_error, dot_cells.c_str(), fma_cells.c_str(), fp8_cells.c_str());
    std::fflush(stdout);
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
    bool quick = false;
    bool dtypes = false;
    std::int64_t max_tokens = 8192;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--quick") {
        quick = true;
      } else if (arg == "--dtypes") {
        dtypes = true;
      } else if (arg == "--max-tokens" && i + 1 < argc) {
        max_tokens = std::atoll(argv[++i]);
      } else {
        std::fprintf(stderr, "usage: %s [--quick | --dtypes] [--max-tokens N]\n", argv[0]);
        return 2;
      }
    }
    if (dtypes) return mla::bench::run_dtypes(max_tokens);
    return mla::bench::run_table("/proc/self/exe", quick, max_tokens);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mla-bench-cpu: %s\n", e.what());
    return 1;
  }
}
