// The MLA step's up-projection on the host: KOKKOS' project_latents on each of
// its GEMMs (the own micro-GEMM and oneDNN, MLA_KOKKOS_PROJECTION) against the
// library GEMMs a user would call, in the same process: OpenBLAS sgemm and
// oneDNN matmul (fp32 and bf16) of the [T, L] latents times kv_b_proj^T,
// (a) into the strided key and value views the attention reads ([T, H, P+R]
// and [T, H, V], the step's shape; OpenBLAS one call per head and part,
// oneDNN one batched call per part), and (b) as one GEMM into a contiguous
// [T, H*(P+V)] result, which does not produce the views but is the fastest
// form of the same product. DeepSeek dims: L 512, P 128, R 64, V 128.
//
//   mla-bench-cpu-projection [--heads 16,128] [--tokens 1024,2048,4096,8192] [--repeats N]
//
// Threads: 1, and all of the Kokkos space's threads when it has several (the
// cpu-openmp build; OMP_NUM_THREADS sets them). KOKKOS runs on one thread when
// called from a thread other than the one that initialised Kokkos
// (backends/kokkos/host_parallel.hpp), here always the same one; OpenBLAS and oneDNN are given the count
// (openblas_set_num_threads, omp_set_num_threads). GFLOP/s from the median of
// the timed calls after one warm-up; 2 * T * L * H * (P+V) FLOP.
//
// Batch invariance (docs/contract.md §6): for each contender, tokens projected
// alone or as a 17-token slice are compared bit for bit with the same tokens
// in the whole call, and the whole call on 1 thread with the one on all threads.
// The exit status is 1 when a KOKKOS contender fails that (ctest runs a small
// case: bench_cpu_projection_smoke).
#include <cblas.h>
#include <omp.h>
#include <Kokkos_Core.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fma_peak.hpp"
#include "mla/backend/registry.hpp"
#include "mla/mla.hpp"

extern "C" char* openblas_get_corename();

namespace mla::bench {
namespace {

constexpr std::int64_t kLatent = 512, kP = 128, kR = 64, kV = 128;

// Every contender computes rows [first, first + count) of the projection into
// its own buffers (allocated once, for all tokens); `rows` reads the first
// `count` rows back as float, [count, H*(P+V)] (keys then values of each head).
struct Contender {
  std::string name;
  std::function<void(std::int64_t first, std::int64_t count)> run;
  std::function<std::vector<float>(std::int64_t count)> rows;
  bool kokkos = false;  // runs through the backend (threads from Kokkos)
};

struct Data {
  DType dtype;
  std::int64_t tokens, heads, columns;
  std::vector<float> latents;         // [T, L]
  std::vector<std::uint16_t> x_bf16;  // the latents rounded to bf16
  std::vector<float> w;               // [H*(P+V), L] rounded to the dtype
  std::vector<std::uint16_t> w_bf16;

  Data(DType type, std::int64_t t, std::int64_t h) : dtype(type), tokens(t), heads(h), columns(h * (kP + kV)) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    latents.resize(static_cast<std::size_t>(tokens * kLatent));
    for (float& x : latents) x = uniform(rng);
    w.resize(static_cast<std::size_t>(columns * kLatent));
    for (float& x : w) x = round_to_dtype(0.05f * uniform(rng), dtype);
    if (dtype == DType::bfloat16) {
      x_bf16.resize(latents.size());
      w_bf16.resize(w.size());
      for (std::size_t i = 0; i < latents.size(); ++i) {
        store_from_float(x_bf16.data(), dtype, static_cast<std::int64_t>(i), latents[i]);
      }
      for (std::size_t i = 0; i < w.size(); ++i)
        store_from_float(w_bf16.data(), dtype, static_cast<std::int64_t>(i), w[i]);
    }
  }
  const void* weights() const { return dtype == DType::float32 ? static_cast<const void*>(w.data()) : w_bf16.data(); }
  std::size_t bytes(std::int64_t elements) const { return static_cast<std::size_t>(elements) * dtype_size(dtype); }
};

using Buffer = std::shared_ptr<std::vector<std::byte>>;

// Keys [T, H, P+R] and values [T, H, V] as the attention reads them.
struct KeyValues {
  Buffer k, v;
};

KeyValues key_values(const Data& d) {
  return {std::make_shared<std::vector<std::byte>>(d.bytes(d.tokens * d.heads * (kP + kR))),
          std::make_shared<std::vector<std::byte>>(d.bytes(d.tokens * d.heads * kV))};
}

std::function<std::vector<float>(std::int64_t)> read_key_values(const Data& d, KeyValues kv) {
  return [&d, kv](std::int64_t count) {
    std::vector<float> out(static_cast<std::size_t>(count * d.columns));
    for (std::int64_t t = 0; t < count; ++t) {
      for (std::int64_t h = 0; h < d.heads; ++h) {
        for (std::int64_t j = 0; j < kP + kV; ++j) {
          out[static_cast<std::size_t>(t * d.columns + h * (kP + kV) + j)] =
              j < kP ? load_as_float(kv.k->data(), d.dtype, (t * d.heads + h) * (kP + kR) + j)
                     : load_as_float(kv.v->data(), d.dtype, (t * d.heads + h) * kV + j - kP);
        }
      }
    }
    return out;
  };
}

// KOKKOS' project_latents through the backend, with MLA_KOKKOS_PROJECTION=gemm.
Contender kokkos_projection(PrefillBackend& backend, const Data& d, const char* gemm, std::string name) {
  const KeyValues kv = key_values(d);
  auto run = [&backend, &d, gemm, kv](std::int64_t first, std::int64_t count) {
    setenv("MLA_KOKKOS_PROJECTION", gemm, 1);
    Queue host = Queue::host();
    const TensorView x = TensorView::contiguous(const_cast<float*>(d.latents.data() + first * kLatent), DType::float32,
                                                {count, kLatent});
    const TensorView w = TensorView::contiguous(const_cast<void*>(d.weights()), d.dtype, {d.columns, kLatent});
    backend.project_latents(host, x, w, TensorView::contiguous(kv.k->data(), d.dtype, {count, d.heads, kP + kR}),
                            TensorView::contiguous(kv.v->data(), d.dtype, {count, d.heads, kV}));
    host.wait();
  };
  return {std::move(name), run, read_key_values(d, kv), true};
}

// OpenBLAS sgemm into the key and value views: two calls per head (keys,
// values), each over all tokens, with the views' row stride as ldc.
Contender openblas_into_views(const Data& d) {
  const KeyValues kv = key_values(d);
  auto run = [&d, kv](std::int64_t first, std::int64_t count) {
    for (std::int64_t h = 0; h < d.heads; ++h) {
      for (const bool keys : {true, false}) {
        const std::int64_t n = keys ? kP : kV, row = keys ? d.heads * (kP + kR) : d.heads * kV;
        float* c = reinterpret_cast<float*>(keys ? kv.k->data() : kv.v->data()) + h * (keys ? kP + kR : kV);
        const float* w = d.w.data() + (h * (kP + kV) + (keys ? 0 : kP)) * kLatent;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(count), static_cast<int>(n),
                    static_cast<int>(kLatent), 1.0f, d.latents.data() + first * kLatent, static_cast<int>(kLatent), w,
                    static_cast<int>(kLatent), 0.0f, c, static_cast<int>(row));
      }
    }
  };
  return {"OpenBLAS sgemm into K/V", run, read_key_values(d, kv), false};
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One oneDNN matmul over all tokens, all heads as its batch, into the key view
// and one into the value view; in the data's dtype, on omp_get_max_threads() threads.
Contender onednn_into_views(const Data& d) {
  const KeyValues kv = key_values(d);
  auto run = [&d, kv](std::int64_t first, std::int64_t count) {
    using dnnl::memory;
    const dnnl::engine& engine = cpu_engine();
    const memory::data_type type = d.dtype == DType::float32 ? memory::data_type::f32 : memory::data_type::bf16;
    const void* x = d.dtype == DType::float32 ? static_cast<const void*>(d.latents.data() + first * kLatent)
                                              : d.x_bf16.data() + first * kLatent;
    dnnl::stream stream(engine);
    for (const bool keys : {true, false}) {
      const std::int64_t n = keys ? kP : kV, row = keys ? d.heads * (kP + kR) : d.heads * kV;
      const memory::desc a({1, count, kLatent}, type, memory::dims{count * kLatent, kLatent, 1});
      const memory::desc b({d.heads, kLatent, n}, type, memory::dims{(kP + kV) * kLatent, 1, kLatent});
      const memory::desc c({d.heads, count, n}, type, memory::dims{keys ? kP + kR : kV, row, 1});
      const dnnl::matmul::primitive_desc desc(dnnl::matmul::desc(a, b, c), engine);
      const auto* w = static_cast<const std::byte*>(d.weights()) + d.bytes(keys ? 0 : kP * kLatent);
      dnnl::matmul(desc).execute(stream, {{DNNL_ARG_SRC, memory(a, engine, const_cast<void*>(x))},
                                          {DNNL_ARG_WEIGHTS, memory(b, engine, const_cast<std::byte*>(w))},
                                          {DNNL_ARG_DST, memory(c, engine, keys ? kv.k->data() : kv.v->data())}});
    }
    stream.wait();
  };
  return {"oneDNN matmul into K/V", run, read_key_values(d, kv), false};
}

std::function<std::vector<float>(std::int64_t)> read_rows(const Data& d, std::shared_ptr<std::vector<std::byte>> c) {
  return [&d, c](std::int64_t count) {
    std::vector<float> out(static_cast<std::size_t>(count * d.columns));
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = load_as_float(c->data(), d.dtype, static_cast<std::int64_t>(i));
    return out;
  };
}

// OpenBLAS sgemm into one contiguous [T, H*(P+V)] result.
Contender openblas_contiguous(const Data& d) {
  auto c = std::make_shared<std::vector<std::byte>>(d.bytes(d.tokens * d.columns));
  auto run = [&d, c](std::int64_t first, std::int64_t count) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(count), static_cast<int>(d.columns),
                static_cast<int>(kLatent), 1.0f, d.latents.data() + first * kLatent, static_cast<int>(kLatent),
                d.w.data(), static_cast<int>(kLatent), 0.0f, reinterpret_cast<float*>(c->data()),
                static_cast<int>(d.columns));
  };
  return {"OpenBLAS sgemm contiguous", run, read_rows(d, c), false};
}

// One oneDNN matmul over all rows into one contiguous [T, H*(P+V)] result: the
// same GEMM without the views' strides, an upper bound. In the data's dtype,
// on omp_get_max_threads() threads.
Contender onednn_contiguous(const Data& d) {
  auto c = std::make_shared<std::vector<std::byte>>(d.bytes(d.tokens * d.columns));
  auto run = [&d, c](std::int64_t first, std::int64_t count) {
    using dnnl::memory;
    const dnnl::engine& engine = cpu_engine();
    const memory::data_type type = d.dtype == DType::float32 ? memory::data_type::f32 : memory::data_type::bf16;
    const memory::desc a({count, kLatent}, type, memory::dims{kLatent, 1});
    const memory::desc b({kLatent, d.columns}, type, memory::dims{1, kLatent});
    const memory::desc out({count, d.columns}, type, memory::dims{d.columns, 1});
    const dnnl::matmul::primitive_desc desc(dnnl::matmul::desc(a, b, out), engine);
    const void* x = d.dtype == DType::float32 ? static_cast<const void*>(d.latents.data() + first * kLatent)
                                              : d.x_bf16.data() + first * kLatent;
    dnnl::stream stream(engine);
    dnnl::matmul(desc).execute(stream, {{DNNL_ARG_SRC, memory(a, engine, const_cast<void*>(x))},
                                        {DNNL_ARG_WEIGHTS, memory(b, engine, const_cast<void*>(d.weights()))},
                                        {DNNL_ARG_DST, memory(out, engine, c->data())}});
    stream.wait();
  };
  return {"oneDNN matmul contiguous", run, read_rows(d, c), false};
}

// One thread that runs the jobs given to it, one at a time: KOKKOS' 1-thread
// calls, made from a thread other than Kokkos' initialising one. The same
// thread throughout, as an engine calls from one thread (KOKKOS keeps some
// buffers per calling thread).
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    run({});
    thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs job on the worker and waits for it; an empty job ends the worker.
  void run(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = std::move(job);
    pending_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !pending_; });
  }

 private:
  void loop() {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return pending_; });
      const bool stop = !job_;
      if (job_) job_();
      pending_ = false;
      changed_.notify_all();
      if (stop) return;
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;
  bool pending_ = false;
  std::thread thread_;
};

// Set by run() for its duration, so that the worker ends before the
// library's statics (oneDNN's engine) do.
Worker* one_thread_worker = nullptr;

// Runs f on `threads` threads: KOKKOS on the initialising thread (all of
// Kokkos' threads) or on the worker thread (one); the libraries on this
// thread with their thread count set.
template <class F>
void on_threads(const Contender& c, int threads, F&& f) {
  if (c.kokkos) {
    if (threads == 1) {
      one_thread_worker->run(f);
    } else {
      f();
    }
    return;
  }
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  f();
  openblas_set_num_threads(1);
  omp_set_num_threads(1);
}

// The median seconds of each contender over `repeats` rounds, after one
// warm-up call each. The rounds interleave the contenders so that load from
// other processes on a shared machine falls on all of them alike.
std::vector<double> median_seconds(const std::vector<Contender>& contenders, int threads, const Data& d, int repeats) {
  std::vector<std::vector<double>> times(contenders.size());
  for (int round = -1; round < repeats; ++round) {
    for (std::size_t i = 0; i < contenders.size(); ++i) {
      const Contender& c = contenders[i];
      on_threads(c, threads, [&] {
        const auto t0 = std::chrono::steady_clock::now();
        c.run(0, d.tokens);
        if (round >= 0)
          times[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      });
      // OpenBLAS' and OpenMP's idle workers spin a while after a call; they
      // must not eat into the next contender's time.
      std::this_thread::sleep_for(std::chrono::milliseconds(threads > 1 ? 200 : 20));
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

double load_average() {
  double load = 0.0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0.0;
    std::fclose(f);
  }
  return load;
}

// "yes", or where the bits first differ.
std::string batch_invariance(const Contender& c, const Data& d, int threads) {
  std::vector<float> all, alone, slice, one_thread;
  on_threads(c, threads, [&] { c.run(0, d.tokens); });
  all = c.rows(d.tokens);
  on_threads(c, 1, [&] { c.run(0, d.tokens); });
  one_thread = c.rows(d.tokens);
  if (all != one_thread) return fmt::format("no: 1 vs {} threads", threads);
  const std::int64_t row = d.columns;
  for (std::int64_t t : {std::int64_t{0}, std::int64_t{5}, d.tokens / 2 + 3}) {
    on_threads(c, threads, [&] { c.run(t, 1); });
    alone = c.rows(1);
    if (!std::equal(alone.begin(), alone.end(), all.begin() + t * row)) return fmt::format("no: token {} alone", t);
  }
  const std::int64_t first = d.tokens / 3 + 1;
  on_threads(c, threads, [&] { c.run(first, 17); });
  slice = c.rows(17);
  if (!std::equal(slice.begin(), slice.end(), all.begin() + first * row)) {
    return fmt::format("no: 17 tokens from {}", first);
  }
  return "yes";
}

std::vector<std::int64_t> parse_list(const char* text) {
  std::vector<std::int64_t> values;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    values.push_back(std::strtoll(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return values;
}

int run(const std::vector<std::int64_t>& heads_list, const std::vector<std::int64_t>& token_list, int repeats) {
  Worker worker;
  one_thread_worker = &worker;
  BackendParams params;
  params.dims = deepseek_dims;  // P, R, V = kP, kR, kV
  params.kv_lora_rank = kLatent;
  std::unique_ptr<PrefillBackend> any = mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).factory(params);
  const int max_threads = Kokkos::DefaultHostExecutionSpace::concurrency();
  // Kokkos has taken its thread count from OpenMP; the libraries start on one.
  openblas_set_num_threads(1);
  omp_set_num_threads(1);
  std::vector<int> thread_counts{1};
  if (max_threads > 1) thread_counts.push_back(max_threads);
  const FmaPeak peak = measure_fma_peak();
  std::printf("CPU: %s, %.0f MHz (cpuinfo); one thread's FP32 FMA peak %.1f GFLOP/s (%s)\n", peak.cpu_model.c_str(),
              peak.cpuinfo_mhz, peak.gflops, peak.isa.c_str());
  std::printf("Kokkos: %s, %d threads; KOKKOS kernel: %s\n", Kokkos::DefaultHostExecutionSpace::name(), max_threads,
              any->kernel_info().c_str());
  std::printf("OpenBLAS %s (core %s); oneDNN %d.%d.%d (%s CPU runtime)\n", OPENBLAS_VERSION, openblas_get_corename(),
              dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch,
              dnnl_version()->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
  std::printf("Load average (1 min) at the start: %.2f\n", load_average());
  std::printf(
      "Shape: latents [T, %lld] x kv_b_proj^T [%lld, H*%lld]; GFLOP/s, median of %d interleaved timed calls\n\n",
      static_cast<long long>(kLatent), static_cast<long long>(kLatent), static_cast<long long>(kP + kV), repeats);
  std::printf(
      "| dtype | heads | tokens | threads | KOKKOS own | KOKKOS oneDNN | OpenBLAS into K/V | oneDNN into K/V | "
      "OpenBLAS contiguous | oneDNN contiguous | KOKKOS oneDNN / best into K/V | KOKKOS oneDNN / best "
      "contiguous |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<std::string> invariance;
  {
    // Untimed: the first calls on all threads of a process ran slow in every
    // trial on the shared machine, whatever came first; settle that here.
    params.dtype = DType::float32;
    params.num_heads = static_cast<int>(heads_list.front());
    auto backend = mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).factory(params);
    const Data d(DType::float32, token_list.front(), heads_list.front());
    (void)median_seconds({kokkos_projection(*backend, d, "onednn", "KOKKOS oneDNN"), onednn_contiguous(d)},
                         thread_counts.back(), d, repeats);
  }
  for (DType dtype : {DType::float32, DType::bfloat16}) {
    params.dtype = dtype;
    for (std::int64_t heads : heads_list) {
      params.num_heads = static_cast<int>(heads);
      auto backend = mla_prefill_registry().resolve(MlaPrefillBackendKind::KOKKOS).factory(params);
      for (std::int64_t tokens : token_list) {
        const Data d(dtype, tokens, heads);
        // OpenBLAS has no bf16 GEMM here (no sbgemm in Debian's 0.3.21).
        const bool fp32 = dtype == DType::float32;
        std::vector<Contender> contenders{kokkos_projection(*backend, d, "own", "KOKKOS own"),
                                          kokkos_projection(*backend, d, "onednn", "KOKKOS oneDNN")};
        if (fp32) contenders.push_back(openblas_into_views(d));
        contenders.push_back(onednn_into_views(d));
        if (fp32) contenders.push_back(openblas_contiguous(d));
        contenders.push_back(onednn_contiguous(d));
        const double gflop = 2.0 * static_cast<double>(tokens * kLatent * d.columns) * 1e-9;
        for (int threads : thread_counts) {
          std::vector<double> rate;
          for (double seconds : median_seconds(contenders, threads, d, repeats)) rate.push_back(gflop / seconds);
          // rate: own, oneDNN, [OpenBLAS K/V], oneDNN K/V, [OpenBLAS contiguous], oneDNN contiguous
          const auto cell = [](double r) { return r > 0 ? fmt::format("{:.1f}", r) : std::string("n/a"); };
          const double openblas_views = fp32 ? rate[2] : 0.0, onednn_views = rate[fp32 ? 3 : 2];
          const double openblas_contig = fp32 ? rate[4] : 0.0, onednn_contig = rate.back();
          std::printf("| %s | %lld | %lld | %d | %.1f | %.1f | %s | %.1f | %s | %.1f | %.2f | %.2f |\n",
                      std::string(dtype_name(dtype)).c_str(), static_cast<long long>(heads),
                      static_cast<long long>(tokens), threads, rate[0], rate[1], cell(openblas_views).c_str(),
                      onednn_views, cell(openblas_contig).c_str(), onednn_contig,
                      rate[1] / std::max(openblas_views, onednn_views),
                      rate[1] / std::max(openblas_contig, onednn_contig));
          std::fflush(stdout);
          if (tokens == token_list.front() && heads == heads_list.front()) {
            for (const Contender& c : contenders) {
              invariance.push_back(fmt::format("| {} | {} | {} | {} |", dtype_name(dtype), c.name, threads,
                                               batch_invariance(c, d, threads)));
            }
          }
        }
      }
    }
  }
  std::printf(
      "\nBatch invariance at %lld heads, %lld tokens: tokens 0, 5 and T/2+3 alone and 17 tokens from "
      "T/3+1, bitwise against the whole call, and the whole call on 1 thread against this count:\n\n"
      "| dtype | contender | threads | invariant |\n|---|---|---:|---|\n",
      static_cast<long long>(heads_list.front()), static_cast<long long>(token_list.front()));
  for (const std::string& line : invariance) std::printf("%s\n", line.c_str());
  const bool kokkos_invariant = std::none_of(invariance.begin(), invariance.end(), [](const std::string& line) {
    return line.find("| KOKKOS") != std::string::npos && line.find("| yes |") == std::string::npos;
  });
  std::printf("\nLoad average (1 min) at the end: %.2f\n", load_average());
  unsetenv("MLA_KOKKOS_PROJECTION");
  if (!kokkos_invariant) {
    std::fprintf(stderr, "mla-bench-cpu-projection: a KOKKOS projection was not batch invariant\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace mla::bench

int main(int argc, char** argv) {
  std::vector<std::int64_t> heads{16, 128}, tokens{1024, 2048, 4096, 8192};
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--heads" && i + 1 < argc) {
      heads = mla::bench::parse_list(argv[++i]);
    } else if (arg == "--tokens" && i + 1 < argc) {
      tokens = mla::bench::parse_list(argv[++i]);
    } else if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--heads 16,128] [--tokens 1024,2048,4096,8192] [--repeats N]\n", argv[0]);
      return 2;
    }
  }
  try {
    return mla::bench::run(heads, tokens, repeats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mla-bench-cpu-projection: %s\n", e.what());
    return 1;
  }
}
