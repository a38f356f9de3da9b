// GPU prefill benchmark of CUDA_FLASH and, on a 9.0 device of a build with
// MLA_WITH_HOPPER_FLASH, HOPPER_FLASH, on DeepSeek dims (dqk 192, V 128,
// bf16, causal), and of merge_attn_states against a device-to-device copy.
//
//   mla-bench-gpu [--quick] [--runs N] [--heads H] [--impl NAME] [--attention-only]
//                 [--dtype bf16|fp8] [--topk K] [--window W] [--seqlens L,...]
//                                          markdown tables on stdout
// --heads and --impl keep only the attention rows of H heads or of one
// backend (CUDA_FLASH, HOPPER_FLASH); --attention-only skips the merge and
// projection tables: short runs for comparing kernel variants in one call.
// --dtype fp8 times each attention case twice, alternating run by run: bf16
// q/k/v and float8_e4m3 q/k/v of the same values (bf16 output, per-tensor
// descales amax / 448 of the bf16 source), and prints both TFLOP/s and the
// fp8/bf16 speed ratio (median and p10-p90 over the run pairs). A backend
// that refuses fp8 on the device gets its validate() reasons in the row. The
// merge and projection tables stay bf16. Default: bf16 alone.
// --topk K and --window W (docs/contract.md §12) time each attention case
// twice, alternating run by run: with a key mask (each query keeps K keys
// drawn at random from those it sees causally, as an indexer would pick
// them, and/or a window of W keys) and dense causal, on the same inputs. The
// masked TFLOP/s count only the (query, key) pairs the mask lets through;
// the masked/dense time ratio is the median (p10-p90) of the pairs.
// --seqlens replaces the sequence lengths (e.g. 8192,32768 with --heads 128
// for DeepSeek-V3.2's masked prefill).
//
// Attention: heads 128 and 16, one sequence of 1k..16k tokens and a varlen
// batch with the same total tokens. Each timed run reads a different set of
// q/k/v (rotating through copies at different offsets of a random pool, so L2
// never holds the inputs); the output buffer is preallocated and the LSE not
// requested, so no allocation sits inside the timed region. TFLOP/s from the
// median of the runs after warm-up, FLOPs as docs/contract.md §7:
// H * (dqk + dv) * sum_i s_i^2.
//
// Merge: bytes moved (both inputs, both LSEs, output and output LSE) over the
// median time, next to cudaMemcpy-like D2D copies (Queue::memcpy) moving the
// same number of bytes.
//
// Projection: the MLA step's up-projection at DeepSeek-V3 TP8 (16 heads,
// kv_lora_rank 512, P = V = 128, bf16 weights and keys), 1k..16k tokens,
// through CUDA_FLASH made once with MLA_CUDA_PROJECTION=own (the own
// tensor-core kernel) and once with =cublaslt (cuBLASLt, or an error), on the
// same random latents and weights. FLOPs 2 * T * L * H * (P + V). The program
// fails (exit 1) when the two differ by more than 1e-2 in relative L2 norm.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "builtin_entries.hpp"
#include "mla/backend/latents.hpp"
#include "mla/detail/numeric.hpp"
#include "mla/mla.hpp"

namespace mla::bench {
namespace {

constexpr MlaDims dims = deepseek_dims;
constexpr DType dtype = DType::bfloat16;
constexpr int rotations = 3;

struct Options {
  bool quick = false;
  int runs = 30;
  int heads = 0;     // > 0: only this head count
  std::string impl;  // non-empty: only this backend
  bool attention_only = false;
  bool fp8 = false;          // --dtype fp8: attention rows also time float8_e4m3 inputs
  int topk = 0;              // > 0: attention rows also time a top-k mask of K keys per query
  int window = 0;            // > 0: ... and/or a sliding window of W keys
  std::vector<int> seqlens;  // non-empty: these lengths instead of the defaults

  bool masked() const { return topk > 0 || window > 0; }
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The nearest-rank `fraction` quantile (0.1: p10) of non-empty `values`.
double quantile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::lround(fraction * static_cast<double>(values.size() - 1)));
  return values[rank];
}

// e4m3's largest finite value: a descale of amax / 448 maps amax onto it.
constexpr float e4m3_max = 448.0f;

// Random bf16 bits (never zero), filled on the host once and copied to the
// device in pieces shifted by an odd stride so no two tensors are equal.
// With `fp8`, also an e4m3 pool that mirrors it element by element: the
// bf16 values over fp8_descale(), rounded to nearest, so the fp8 tensor at
// fp8_at(offset) holds the values of the bf16 tensor at at(offset).
class RandomPool {
 public:
  RandomPool(Queue& queue, std::size_t bytes, bool fp8)
      : buffer_(UsmBuffer::device(queue, bytes)), fp8_(fp8 ? UsmBuffer::device(queue, bytes / 2) : UsmBuffer()) {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
    std::vector<std::uint16_t> block(std::size_t{32} << 20);  // 64 MiB
    for (std::size_t i = 0; i < block.size(); ++i) {
      const float value = (i % 2 ? 1.0f : -1.0f) * uniform(rng);
      block[i] = numeric::float_to_bf16(value);
    }
    // Every q, k and v is a window of millions of values of this block, so
    // each reaches the block's amax: one descale from it serves all three.
    std::vector<std::uint8_t> codes;
    if (fp8) {
      float amax = 0.0f;
      for (std::uint16_t bits : block) amax = std::max(amax, std::fabs(numeric::bf16_to_float(bits)));
      fp8_descale_ = amax / e4m3_max;
      codes.resize(block.size());
      for (std::size_t i = 0; i < block.size(); ++i) {
        codes[i] = numeric::float_to_fp8_e4m3(numeric::bf16_to_float(block[i]) / fp8_descale_);
      }
    }
    const std::size_t block_bytes = block.size() * 2;
    for (std::size_t offset = 0, shift = 0; offset < bytes;
         offset += block_bytes - shift, shift = (shift + 4098) % 65536) {
      const std::size_t n = std::min(block_bytes - shift, bytes - offset);
      queue.memcpy(static_cast<std::uint8_t*>(buffer_.get()) + offset,
                   reinterpret_cast<std::uint8_t*>(block.data()) + shift, n);
      // Offsets and shifts are even: half of each, in one-byte elements.
      if (fp8) queue.memcpy(fp8_at(offset), codes.data() + shift / 2, n / 2);
    }
    queue.wait();
  }
  // A 256-byte aligned region starting at `offset` bytes.
  void* at(std::size_t offset) const { return static_cast<std::uint8_t*>(buffer_.get()) + offset; }
  std::size_t bytes() const { return buffer_.bytes(); }
  // The e4m3 elements of the bf16 ones at at(offset) (128-byte aligned).
  void* fp8_at(std::size_t offset) const { return static_cast<std::uint8_t*>(fp8_.get()) + offset / 2; }
  float fp8_descale() const { return fp8_descale_; }

 private:
  UsmBuffer buffer_;
  UsmBuffer fp8_;
  float fp8_descale_ = 1.0f;
};

// Seven sequences of odd lengths summing to `total`; sdpa_peer.py uses the same rule.
std::vector<int> varlen_lengths(int total) {
  const int unit = total / 16;
  std::vector<int> lengths = {4 * unit + 1, 2 * unit - 1, unit + 3, 3 * unit - 3, 2 * unit + 5, unit - 5, 3 * unit};
  int sum = 0;
  for (int s : lengths) sum += s;
  lengths.back() += total - sum;
  return lengths;
}

double causal_flops(int heads, const std::vector<int>& lengths) {
  double sum = 0.0;
  for (int s : lengths) sum += static_cast<double>(s) * s;
  return heads * static_cast<double>(dims.qk_head_dim() + dims.v_head_dim) * sum;
}

TensorView view(void* data, std::int64_t tokens, int heads, int dim, DType type = dtype) {
  return TensorView::contiguous(data, type, {tokens, heads, dim}, MemoryKind::device);
}

// validate()'s reasons on one line, as the HOPPER_FLASH note prints them;
// '|' would split a markdown cell.
std::string joined(const std::vector<std::string>& reasons) {
  std::string line;
  for (const std::string& reason : reasons) line += (line.empty() ? "" : "; ") + reason;
  std::replace(line.begin(), line.end(), '|', '/');
  return line;
}

// DeepSeek-V3's softmax scale: 192^-0.5 * mscale^2.
constexpr float kScale = 0.1352337788608801f;

std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The key mask of --topk / --window on `queue`: per query `topk` positions
// drawn without repetition from the keys it sees causally (all of them when
// it sees fewer), built by HostTopkMask::from_indices, and the (query, key)
// pairs it and the window let through, which the masked TFLOP/s count.
struct BenchMask {
  UsmBuffer words;
  AttentionMask mask;
  double visible_pairs = 0.0;
};

BenchMask bench_mask(Queue& queue, const PrefillMetadata& metadata, const Options& options) {
  BenchMask result;
  result.mask.window = options.window;
  std::mt19937_64 rng(20261130);
  const std::int64_t k = options.topk;
  std::vector<std::int32_t> indices;
  std::vector<std::int32_t> order;
  for (int b = 0; b < metadata.batch_size(); ++b) {
    const int sq = metadata.cu_seqlens_q[b + 1] - metadata.cu_seqlens_q[b];
    for (int i = 0; i < sq; ++i) {
      const int seen = i + 1;  // new tokens against themselves: query i sees keys 0..i
      const int first = options.window > 0 ? std::max(0, i - options.window + 1) : 0;
      if (k == 0) {
        result.visible_pairs += seen - first;
        continue;
      }
      order.resize(static_cast<std::size_t>(seen));
      std::iota(order.begin(), order.end(), 0);
      const int keep = static_cast<int>(std::min<std::int64_t>(k, seen));
      for (int n = 0; n < keep; ++n) {
        std::uniform_int_distribution<int> pick(n, seen - 1);
        std::swap(order[static_cast<std::size_t>(n)], order[static_cast<std::size_t>(pick(rng))]);
        if (order[static_cast<std::size_t>(n)] >= first) result.visible_pairs += 1.0;
      }
      order.resize(static_cast<std::size_t>(keep));
      order.resize(static_cast<std::size_t>(k), -1);
      indices.insert(indices.end(), order.begin(), order.end());
    }
  }
  if (k > 0) {
    const HostTopkMask bits = HostTopkMask::from_indices(metadata, indices.data(), k, k);
    const TopkMask view = bits.view();
    const auto bytes = static_cast<std::size_t>(view.batch_size * view.batch_stride) * sizeof(std::uint32_t);
    result.words = UsmBuffer::device(queue, bytes);
    queue.memcpy(result.words.get(), view.words, bytes);
    queue.wait();
    result.mask.topk = TopkMask::contiguous(result.words.as<const std::uint32_t>(), view.batch_size, view.rows,
                                            view.words_per_row, MemoryKind::device);
  }
  return result;
}

// One row: `entry` on bf16 q/k/v and, with --dtype fp8, on float8_e4m3 q/k/v
// of the same values, the two alternating run by run so that clock and
// thermal drift hit both alike.
void attention_row(Queue& queue, const RandomPool& pool, const BackendEntry& entry, int heads,
                   const std::vector<int>& lengths, const char* batch, const Options& options) {
  const PrefillMetadata metadata = PrefillMetadata::from_lengths(lengths, lengths, true);
  const std::int64_t tokens = metadata.num_q_tokens();
  BackendParams params;
  params.num_heads = heads;
  params.dims = dims;
  params.dtype = dtype;
  auto backend = entry.factory(params);
  backend->prepare(queue, metadata);

  const std::size_t q_bytes = round_up(static_cast<std::size_t>(tokens) * heads * dims.qk_head_dim() * 2);
  const std::size_t v_bytes = round_up(static_cast<std::size_t>(tokens) * heads * dims.v_head_dim * 2);
  const std::size_t set_bytes = 2 * q_bytes + v_bytes;
  // Rotations start at different offsets of the pool; they overlap when the
  // pool is small, but never start at the same byte.
  const std::size_t spare = pool.bytes() > set_bytes ? pool.bytes() - set_bytes : 0;
  UsmBuffer out = UsmBuffer::device(queue, static_cast<std::size_t>(tokens) * heads * dims.v_head_dim * 2);
  const TensorView out_view = view(out.get(), tokens, heads, dims.v_head_dim);
  const auto base_of = [&](int rotation) { return spare / rotations * static_cast<std::size_t>(rotation) / 256 * 256; };
  auto run = [&](int rotation) {
    const std::size_t base = base_of(rotation);
    backend->run_new_tokens(queue, view(pool.at(base), tokens, heads, dims.qk_head_dim()),
                            view(pool.at(base + q_bytes), tokens, heads, dims.qk_head_dim()),
                            view(pool.at(base + 2 * q_bytes), tokens, heads, dims.v_head_dim), kScale, false, out_view);
  };

  // The fp8 backend, or why there is none: validate()'s reasons, or the error
  // of building it or of its first run, so a refusal is a row, not a failure.
  std::unique_ptr<PrefillBackend> fp8_backend;
  std::string fp8_refusal;
  const float descale = pool.fp8_descale();
  const InputDescales descales{descale, descale, descale};
  auto run_fp8 = [&](int rotation) {
    const std::size_t base = base_of(rotation);
    const DType e4m3 = DType::float8_e4m3;
    fp8_backend->run_new_tokens(queue, view(pool.fp8_at(base), tokens, heads, dims.qk_head_dim(), e4m3),
                                view(pool.fp8_at(base + q_bytes), tokens, heads, dims.qk_head_dim(), e4m3),
                                view(pool.fp8_at(base + 2 * q_bytes), tokens, heads, dims.v_head_dim, e4m3), kScale,
                                false, out_view, std::nullopt, std::nullopt, descales);
  };
  if (options.fp8) {
    fp8_refusal = joined(validate(entry.description, queue.capability(), {DType::float8_e4m3, dims}));
    if (fp8_refusal.empty()) {
      try {
        BackendParams fp8_params = params;
        fp8_params.dtype = DType::float8_e4m3;
        fp8_params.out_dtype = dtype;  // bf16 output, as the bf16 rows write
        fp8_backend = entry.factory(fp8_params);
        fp8_backend->prepare(queue, metadata);
        run_fp8(0);
        queue.wait();
      } catch (const Error& error) {
        fp8_refusal = error.what();
        fp8_backend.reset();
      }
    }
  }

  // --topk / --window: the same backend with the key mask, or why not.
  BenchMask mask;
  std::string mask_refusal;
  auto run_masked = [&](int rotation) {
    const std::size_t base = base_of(rotation);
    backend->run_new_tokens(queue, view(pool.at(base), tokens, heads, dims.qk_head_dim()),
                            view(pool.at(base + q_bytes), tokens, heads, dims.qk_head_dim()),
                            view(pool.at(base + 2 * q_bytes), tokens, heads, dims.v_head_dim), kScale, false, out_view,
                            std::nullopt, std::nullopt, std::nullopt, mask.mask);
  };
  bool masked = false;
  if (options.masked()) {
    try {
      mask = bench_mask(queue, metadata, options);
      run_masked(0);
      queue.wait();
      masked = true;
    } catch (const Error& error) {
      mask_refusal = error.what();
      std::replace(mask_refusal.begin(), mask_refusal.end(), '|', '/');
    }
  }

  const auto timed = [&](auto&& call, int rotation) {
    const Event start = queue.record();
    call(rotation);
    const Event end = queue.record();
    return Event::elapsed_ms(start, end);
  };
  for (int i = 0; i < 3; ++i) {
    run(i % rotations);
    if (fp8_backend) run_fp8(i % rotations);
    if (masked) run_masked(i % rotations);
  }
  std::vector<double> ms, fp8_ms, masked_ms;
  for (int i = 0; i < options.runs; ++i) {
    ms.push_back(timed(run, i % rotations));
    if (fp8_backend) fp8_ms.push_back(timed(run_fp8, i % rotations));
    if (masked) masked_ms.push_back(timed(run_masked, i % rotations));
  }
  const double t = median(ms);
  const double flops = causal_flops(heads, lengths);
  std::string seqlens = lengths.size() == 1 ? std::to_string(lengths[0]) : std::to_string(lengths.size()) + " seqs";
  if (options.masked()) {
    std::printf("| %s | bf16 192/128 causal | %d | %s | %s | %lld | %.3f | %.1f | ", entry.description.name.c_str(),
                heads, batch, seqlens.c_str(), static_cast<long long>(tokens), t, flops / (t * 1e-3) / 1e12);
    if (masked) {
      // Time ratio of each pair (masked ms / dense ms); FLOPs of the visible pairs, as §7 counts causal ones.
      std::vector<double> ratios;
      for (std::size_t i = 0; i < ms.size(); ++i) ratios.push_back(masked_ms[i] / ms[i]);
      const double tm = median(masked_ms);
      const double masked_flops =
          heads * static_cast<double>(dims.qk_head_dim() + dims.v_head_dim) * 2.0 * mask.visible_pairs;
      std::printf("%.3f | %.1f | %.3f (%.3f-%.3f) |\n", tm, masked_flops / (tm * 1e-3) / 1e12, median(ratios),
                  quantile(ratios, 0.1), quantile(ratios, 0.9));
    } else {
      std::printf("- | - | mask refused: %s |\n", mask_refusal.c_str());
    }
    std::fflush(stdout);
    return;
  }
  if (!options.fp8) {
    std::printf("| %s | bf16 192/128 causal | %d | %s | %s | %lld | %.3f | %.1f |\n", entry.description.name.c_str(),
                heads, batch, seqlens.c_str(), static_cast<long long>(tokens), t, flops / (t * 1e-3) / 1e12);
    std::fflush(stdout);
    return;
  }
  std::printf("| %s | e4m3 (bf16 out) vs bf16 192/128 causal | %d | %s | %s | %lld | %.3f | %.1f | ",
              entry.description.name.c_str(), heads, batch, seqlens.c_str(), static_cast<long long>(tokens), t,
              flops / (t * 1e-3) / 1e12);
  if (fp8_backend) {
    // Speed ratio of each bf16/fp8 pair (bf16 ms / fp8 ms), as TFLOP/s divide.
    std::vector<double> ratios;
    for (std::size_t i = 0; i < ms.size(); ++i) ratios.push_back(ms[i] / fp8_ms[i]);
    const double t8 = median(fp8_ms);
    std::printf("%.3f | %.1f | %.2f (%.2f-%.2f) |\n", t8, flops / (t8 * 1e-3) / 1e12, median(ratios),
                quantile(ratios, 0.1), quantile(ratios, 0.9));
  } else {
    std::printf("- | - | fp8 refused: %s |\n", fp8_refusal.c_str());
  }
  std::fflush(stdout);
}

void merge_row(Queue& queue, const RandomPool& pool, std::int64_t tokens, int heads, const Options& options) {
  BackendParams params;
  params.num_heads = heads;
  params.dims = dims;
  params.dtype = dtype;
  auto backend = detail::cuda_flash_backend_entry().factory(params);
  const int dv = dims.v_head_dim;
  const std::size_t out_bytes = static_cast<std::size_t>(tokens) * heads * dv * 2;
  const std::size_t lse_bytes = static_cast<std::size_t>(tokens) * heads * 4;
  // LSEs: finite values, so every element takes the full weighted path.
  std::vector<float> lse_host(static_cast<std::size_t>(tokens) * heads);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> lse_value(-3.0f, 3.0f);
  for (float& x : lse_host) x = lse_value(rng);
  UsmBuffer prefix_lse = UsmBuffer::device(queue, lse_bytes);
  UsmBuffer suffix_lse = UsmBuffer::device(queue, lse_bytes);
  UsmBuffer out_lse = UsmBuffer::device(queue, lse_bytes);
  UsmBuffer out = UsmBuffer::device(queue, out_bytes);
  queue.memcpy(prefix_lse.get(), lse_host.data(), lse_bytes);
  std::reverse(lse_host.begin(), lse_host.end());
  queue.memcpy(suffix_lse.get(), lse_host.data(), lse_bytes);
  const auto lse_view = [&](UsmBuffer& b) {
    return TensorView::contiguous(b.get(), DType::float32, {heads, tokens}, MemoryKind::device);
  };
  MergeArgs args{view(pool.at(0), tokens, heads, dv),
                 lse_view(prefix_lse),
                 view(pool.at(round_up(out_bytes)), tokens, heads, dv),
                 lse_view(suffix_lse),
                 view(out.get(), tokens, heads, dv),
                 lse_view(out_lse),
                 std::nullopt,
                 std::nullopt};
  const double moved = 3.0 * static_cast<double>(out_bytes) + 3.0 * static_cast<double>(lse_bytes);
  std::vector<double> merge_ms;
  std::vector<double> copy_ms;
  // The copy moves the same bytes: read half, write half.
  const auto copy_bytes = static_cast<std::size_t>(moved / 2);
  if (copy_bytes > pool.bytes()) raise(ErrorCategory::internal, "mla-bench-gpu: random pool smaller than the copy");
  UsmBuffer copy_dst = UsmBuffer::device(queue, copy_bytes);
  for (int i = 0; i < 3 + options.runs; ++i) {
    const Event a = queue.record();
    backend->merge_attn_states(queue, args);
    const Event b = queue.record();
    queue.memcpy(copy_dst.get(), pool.at(0), copy_bytes);
    const Event c = queue.record();
    if (i < 3) continue;
    merge_ms.push_back(Event::elapsed_ms(a, b));
    copy_ms.push_back(Event::elapsed_ms(b, c));
  }
  const double tm = median(merge_ms);
  const double tc = median(copy_ms);
  std::printf("| merge_attn_states | bf16 V=128 | %d | %lld | %.3f | %.0f | %.3f | %.0f | %.2f |\n", heads,
              static_cast<long long>(tokens), tm, moved / (tm * 1e-3) / 1e9, tc, moved / (tc * 1e-3) / 1e9, tc / tm);
}

// The projection table's bound: bf16 operands, fp32 sums in different orders.
constexpr double projection_max_error = 1e-2;

// CUDA_FLASH made with MLA_CUDA_PROJECTION=`path`; the variable is put back.
std::unique_ptr<PrefillBackend> projection_backend(const BackendParams& params, const char* path) {
  const char* old = std::getenv("MLA_CUDA_PROJECTION");
  const std::string previous = old != nullptr ? old : "";
  ::setenv("MLA_CUDA_PROJECTION", path, 1);
  auto backend = detail::cuda_flash_backend_entry().factory(params);
  if (old != nullptr) {
    ::setenv("MLA_CUDA_PROJECTION", previous.c_str(), 1);
  } else {
    ::unsetenv("MLA_CUDA_PROJECTION");
  }
  return backend;
}

std::vector<float> download_floats(Queue& queue, const UsmBuffer& buffer, std::size_t count) {
  std::vector<std::uint16_t> bits(count);
  queue.memcpy(bits.data(), buffer.get(), count * 2);
  queue.wait();
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = numeric::bf16_to_float(bits[i]);
  return values;
}

// One row per token count and path; returns the largest relative error seen.
double projection_rows(Queue& queue, const std::vector<std::int64_t>& token_counts, const Options& options) {
  constexpr int heads = 16, latent = 512, p = 128, r = 64, v_dim = 128;
  BackendParams params;
  params.num_heads = heads;
  params.dims = {p, r, v_dim};
  params.dtype = dtype;
  params.kv_lora_rank = latent;
  const std::int64_t most = token_counts.back();
  // Random latents in [-1, 1] and weights in [-0.1, 0.1], never zero, in
  // bf16: the latents in the dtype the backends' step passes them in
  // (PrefillBackend::latent_dtype), which cuBLASLt reads in place.
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> unit(0.02f, 1.0f);
  const auto signed_value = [&](std::size_t i) { return (i % 3 == 0 ? -1.0f : 1.0f) * unit(rng); };
  std::vector<std::uint16_t> latents_host(static_cast<std::size_t>(most * latent));
  for (std::size_t i = 0; i < latents_host.size(); ++i) latents_host[i] = numeric::float_to_bf16(signed_value(i));
  std::vector<std::uint16_t> weight_host(static_cast<std::size_t>(heads) * (p + v_dim) * latent);
  for (std::size_t i = 0; i < weight_host.size(); ++i) weight_host[i] = numeric::float_to_bf16(0.1f * signed_value(i));
  UsmBuffer latents = UsmBuffer::device(queue, latents_host.size() * 2);
  UsmBuffer weight = UsmBuffer::device(queue, weight_host.size() * 2);
  queue.memcpy(latents.get(), latents_host.data(), latents.bytes());
  queue.memcpy(weight.get(), weight_host.data(), weight.bytes());
  const TensorView w = TensorView::contiguous(weight.get(), dtype, {heads * (p + v_dim), latent}, MemoryKind::device);

  struct Path {
    const char* name;
    std::unique_ptr<PrefillBackend> backend;
    UsmBuffer k, v;
  };
  std::vector<Path> paths;
  paths.push_back({"own tensor cores", projection_backend(params, "own"), {}, {}});
  paths.push_back({"cuBLASLt", projection_backend(params, "cublaslt"), {}, {}});
  double worst = 0.0;
  for (const std::int64_t tokens : token_counts) {
    const TensorView x = TensorView::contiguous(latents.get(), dtype, {tokens, latent}, MemoryKind::device);
    const auto k_count = static_cast<std::size_t>(tokens) * heads * (p + r);
    const auto v_count = static_cast<std::size_t>(tokens) * heads * v_dim;
    std::vector<double> ms(paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) {
      Path& path = paths[i];
      path.k = UsmBuffer::device(queue, k_count * 2);
      path.v = UsmBuffer::device(queue, v_count * 2);
      queue.memset(path.k.get(), 0, k_count * 2);  // the rope columns, which neither path writes
      const TensorView k = TensorView::contiguous(path.k.get(), dtype, {tokens, heads, p + r}, MemoryKind::device);
      const TensorView v = TensorView::contiguous(path.v.get(), dtype, {tokens, heads, v_dim}, MemoryKind::device);
      for (int warm = 0; warm < 3; ++warm) path.backend->project_latents(queue, x, w, k, v);
      std::vector<double> runs;
      for (int run = 0; run < options.runs; ++run) {
        const Event start = queue.record();
        path.backend->project_latents(queue, x, w, k, v);
        const Event end = queue.record();
        runs.push_back(Event::elapsed_ms(start, end));
      }
      ms[i] = median(runs);
    }
    double diff = 0.0, norm = 0.0;
    for (const auto& [buffer_of, count] : {std::pair{&Path::k, k_count}, std::pair{&Path::v, v_count}}) {
      const std::vector<float> own = download_floats(queue, paths[0].*buffer_of, count);
      const std::vector<float> lt = download_floats(queue, paths[1].*buffer_of, count);
      for (std::size_t i = 0; i < count; ++i) {
        diff += (double{own[i]} - lt[i]) * (double{own[i]} - lt[i]);
        norm += double{own[i]} * own[i];
      }
    }
    const double error = norm > 0 ? std::sqrt(diff / norm) : 1.0;  // all zeros: nothing ran
    worst = std::max(worst, error);
    const double flops = 2.0 * static_cast<double>(tokens) * latent * heads * (p + v_dim);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      std::printf("| %s | bf16 L=512 H=16 128+128 | %lld | %.3f | %.1f | %.2e |\n", paths[i].name,
                  static_cast<long long>(tokens), ms[i], flops / (ms[i] * 1e-3) / 1e12, error);
    }
    std::fflush(stdout);
  }
  return worst;
}

int run(const Options& options) {
  if (detect_devices().empty()) {
    std::fprintf(stderr, "mla-bench-gpu: no CUDA device\n");
    return 2;
  }
  Queue queue(DeviceBackend::cuda, 0);
  std::printf("Device: %s\n\n", queue.capability().describe().c_str());
  const std::vector<int> seqlens = !options.seqlens.empty() ? options.seqlens
                                   : options.quick          ? std::vector<int>{1024, 4096}
                                                            : std::vector<int>{1024, 2048, 4096, 8192, 16384};
  const std::vector<int> heads = options.heads > 0 ? std::vector<int>{options.heads}
                                 : options.quick   ? std::vector<int>{16}
                                                   : std::vector<int>{128, 16};
  const std::vector<std::int64_t> merge_tokens =
      options.quick ? std::vector<std::int64_t>{16384} : std::vector<std::int64_t>{16384, 65536};
  // Pool: one rotation set of the largest attention case plus room to shift,
  // and the two merge inputs of the largest merge (whose copy reads less).
  const std::size_t largest = static_cast<std::size_t>(*std::max_element(seqlens.begin(), seqlens.end())) *
                              heads.front() * (2 * dims.qk_head_dim() + dims.v_head_dim) * 2;
  const std::size_t merge_inputs =
      2 * round_up(static_cast<std::size_t>(merge_tokens.back()) * heads.front() * dims.v_head_dim * 2);
  const RandomPool pool(queue, std::max(largest + largest / 2, merge_inputs), options.fp8);

  // The kernels timed side by side: CUDA_FLASH everywhere, HOPPER_FLASH where it is valid.
  std::vector<BackendEntry> kernels;
  if (options.impl.empty() || options.impl == "CUDA_FLASH") kernels.push_back(detail::cuda_flash_backend_entry());
  const BackendEntry hopper = detail::hopper_flash_backend_entry();
  const std::vector<std::string> hopper_reasons = validate(hopper.description, queue.capability(), {dtype, dims});
  if (!options.impl.empty() && options.impl != "HOPPER_FLASH") {
    // not asked for
  } else if (hopper_reasons.empty()) {
    kernels.push_back(hopper);
  } else {
    std::printf("HOPPER_FLASH not timed:");
    for (const std::string& reason : hopper_reasons) std::printf(" %s;", reason.c_str());
    std::printf("\n\n");
  }

  if (options.masked()) {
    std::printf("Attention: a key mask (top-k %d, window %d; 0: none) against dense causal, alternating run by run\n\n",
                options.topk, options.window);
    std::printf(
        "| impl | shape | heads | batch | seqlens | tokens | dense median ms | dense TFLOP/s | masked median ms "
        "| masked TFLOP/s (visible pairs) | masked/dense time, median (p10-p90) of pairs |\n");
    std::printf("|---|---|---:|---|---|---:|---:|---:|---:|---:|---|\n");
  } else if (!options.fp8) {
    std::printf("| impl | shape | heads | batch | seqlens | tokens | median ms | TFLOP/s |\n");
    std::printf("|---|---|---:|---|---|---:|---:|---:|\n");
  } else {
    std::printf(
        "Attention: float8_e4m3 q/k/v (per-tensor descales amax / 448 = %.6g) with bf16 output, and bf16 "
        "q/k/v of the same values, alternating run by run\n\n",
        pool.fp8_descale());
    std::printf(
        "| impl | shape | heads | batch | seqlens | tokens | bf16 median ms | bf16 TFLOP/s | fp8 median ms "
        "| fp8 TFLOP/s | fp8/bf16 speed, median (p10-p90) of pairs |\n");
    std::printf("|---|---|---:|---|---|---:|---:|---:|---:|---:|---|\n");
  }
  for (int h : heads) {
    for (int s : seqlens) {
      for (const BackendEntry& kernel : kernels) {
        attention_row(queue, pool, kernel, h, {s}, "one sequence", options);
        attention_row(queue, pool, kernel, h, varlen_lengths(s), "varlen", options);
      }
    }
  }
  if (options.attention_only) return 0;
  if (options.fp8) std::printf("\nMerge and projection: bf16 (--dtype fp8 applies to the attention rows only)\n");
  std::printf(
      "\n| impl | shape | heads | tokens | median ms | GB/s | D2D copy ms | copy GB/s | merge / copy speed |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int h : heads) {
    for (std::int64_t tokens : merge_tokens) merge_row(queue, pool, tokens, h, options);
  }
  std::printf("\n| projection | shape | tokens | median ms | TFLOP/s | rel. error vs own |\n");
  std::printf("|---|---|---:|---:|---:|---:|\n");
  const double error = projection_rows(queue, {1024, 4096, 16384}, options);
  if (!(error <= projection_max_error)) {
    std::fprintf(stderr, "mla-bench-gpu: cuBLASLt and the own projection differ by %.3e (bound %.0e)\n", error,
                 projection_max_error);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace mla::bench

int main(int argc, char** argv) {
  mla::bench::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--runs" && i + 1 < argc) {
      options.runs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--heads" && i + 1 < argc) {
      options.heads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--impl" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "CUDA_FLASH" || std::string(argv[i + 1]) == "HOPPER_FLASH")) {
      options.impl = argv[++i];
    } else if ((arg == "--topk" || arg == "--window") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      (arg == "--topk" ? options.topk : options.window) = std::atoi(argv[++i]);
    } else if (arg == "--seqlens" && i + 1 < argc) {
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        const long value = std::strtol(p, &end, 10);
        if (end == p || value <= 0 || value > (1 << 24)) {
          std::fprintf(stderr, "mla-bench-gpu: --seqlens takes positive lengths separated by commas, not '%s'\n",
                       argv[i]);
          return 2;
        }
        options.seqlens.push_back(static_cast<int>(value));
        p = *end == ',' ? end + 1 : end;
      }
    } else if (arg == "--attention-only") {
      options.attention_only = true;
    } else if (arg == "--dtype" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "bf16" || std::string(argv[i + 1]) == "fp8")) {
      options.fp8 = std::string(argv[++i]) == "fp8";
    } else {
      if (arg == "--dtype" && i + 1 < argc) {
        std::fprintf(stderr, "mla-bench-gpu: --dtype takes bf16 or fp8, not '%s'\n", argv[i + 1]);
      } else if (arg == "--dtype") {
        std::fprintf(stderr, "mla-bench-gpu: --dtype needs a value, bf16 or fp8\n");
      }
      std::fprintf(stderr,
                   "usage: mla-bench-gpu [--quick] [--runs N] [--heads H] [--impl CUDA_FLASH|HOPPER_FLASH] "
                   "[--attention-only] [--dtype bf16|fp8] [--topk K] [--window W] [--seqlens L,...]\n");
      return 2;
    }
  }
  if (options.masked() && options.fp8) {
    std::fprintf(stderr, "mla-bench-gpu: --topk / --window time bf16 against bf16; leave out --dtype fp8\n");
    return 2;
  }
  try {
    return mla::bench::run(options);
  } catch (const mla::Error& error) {
    std::fprintf(stderr, "mla-bench-gpu: %s\n", error.what());
    return 1;
  }
}
