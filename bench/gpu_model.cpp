// What the GPU kernels would cost an H100, counted by the SIMT emulator while
// it runs them (tests/support/simt/cost.hpp): no GPU needed, so CI prints it.
//
//   mla-gpu-model [--tokens N] [--heads H]    markdown table on stdout
//
// One causal sequence at DeepSeek-V3's head dims scaled down in heads and
// tokens (qk 192 = 128 + 64, v 128, bf16; 2 heads of 512 tokens by default)
// through CUDA_FLASH, HOPPER_FLASH and HIP_FLASH (gfx90a forms, where the
// build has it) as emulated backends, and through HOPPER_FLASH again with
// float8_e4m3 inputs (bf16 output; its tensor bound at the fp8 peak), and the MLA step's up-projection
// (latent 512) through CUDA_FLASH's own tensor-core kernel and HIP_FLASH's
// MFMA kernel. Per kernel: the
// counts per key tile (one query tile against one key tile, the unit of the
// attention main loop), the bank-conflict replays, and a roofline for an
// H100 SXM: 989 TF/s dense bf16 (1979 fp8), 128 B/clk/SM of shared memory and 16
// ex2/clk/SM on 132 SMs at 1.83 GHz (the on-chip bound: the slowest of the
// three at the counted amounts), and 3.35 TB/s of HBM as if every requested
// global byte came from HBM (a bound that L2 hits lift). "global sector use"
// is the requested bytes over the 32-byte sectors they touch, per warp-wide
// request: below 100% the memory system moves bytes nobody reads.
//
// Exits 1 when an attention kernel's shared accesses have bank-conflict
// replays, or when a kernel it expects reported no tensor-core work.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cuda/flash_config.hpp"
#include "cuda/hopper_config.hpp"
#include "hip/flash_config.hpp"
#include "mla/mla.hpp"
#include "simt/cost.hpp"
#include "simt/emulated_backends.hpp"
#include "simt/hip_flash_emulated.hpp"
#include "simt/hopper_flash_emulated.hpp"

namespace mla::bench {
namespace {

constexpr double peak_flops = 989e12;
constexpr double peak_fp8_flops = 1979e12;
constexpr double hbm_bytes_per_s = 3.35e12;
constexpr double sm_clocks_per_s = 132 * 1.83e9;  // all SMs together
constexpr double exps_per_sm_clock = 16;
constexpr int latent_rank = 512;

struct Options {
  int tokens = 512;
  int heads = 2;
};

// Host memory aligned as a GPU allocation is (256 bytes), so that the
// sectors a warp touches are those it would touch on a GPU.
template <class T>
class Aligned {
 public:
  explicit Aligned(std::size_t count) : storage_(count * sizeof(T) + alignment) {
    auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    data_ = reinterpret_cast<T*>((address + alignment - 1) / alignment * alignment);
  }
  T* data() { return data_; }

 private:
  static constexpr std::size_t alignment = 256;
  std::vector<unsigned char> storage_;
  T* data_ = nullptr;
};

Aligned<std::uint16_t> random_bf16(std::size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  Aligned<std::uint16_t> bits(count);
  for (std::size_t i = 0; i < count; ++i) bits.data()[i] = numeric::float_to_bf16(value(rng));
  return bits;
}

// e4m3 codes of values in [-2, 2] (two to an entry, as the bf16 buffers hold them).
Aligned<std::uint16_t> random_e4m3(std::size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  Aligned<std::uint16_t> bits((count + 1) / 2);
  auto* bytes = reinterpret_cast<std::uint8_t*>(bits.data());
  for (std::size_t i = 0; i < count; ++i) bytes[i] = numeric::float_to_fp8_e4m3(value(rng));
  return bits;
}

// DeepSeek-V3's head dims in bf16 at the options' head count; `fp8`:
// float8_e4m3 inputs with bf16 output.
BackendParams model_params(const Options& options, bool fp8 = false) {
  BackendParams params;
  params.num_heads = options.heads;
  params.dims = {128, 64, 128};
  params.dtype = fp8 ? DType::float8_e4m3 : DType::bfloat16;
  if (fp8) params.out_dtype = DType::bfloat16;
  params.kv_lora_rank = latent_rank;
  return params;
}

// Runs `entry`'s backend on one causal sequence; false when the build lacks it.
bool run_attention(const BackendEntry& entry, const Options& options, std::mt19937& rng, bool fp8 = false) {
  const BackendParams params = model_params(options, fp8);
  if (entry.description.availability) {
    const Availability availability = entry.description.availability();
    if (!availability.available) {
      std::printf("%s not run: %s\n\n", entry.description.name.c_str(), availability.reason.c_str());
      return false;
    }
  }
  auto backend = entry.factory(params);
  const std::int64_t t = options.tokens;
  const auto random = [&](std::size_t count) { return fp8 ? random_e4m3(count, rng) : random_bf16(count, rng); };
  auto q = random(static_cast<std::size_t>(t * options.heads * 192));
  auto k = random(static_cast<std::size_t>(t * options.heads * 192));
  auto v = random(static_cast<std::size_t>(t * options.heads * 128));
  const auto view = [&](Aligned<std::uint16_t>& data, int dim) {
    return TensorView::contiguous(data.data(), params.dtype, {t, options.heads, dim}, MemoryKind::host);
  };
  Queue queue = Queue::host();
  backend->prepare(queue, PrefillMetadata::from_lengths({options.tokens}, {options.tokens}, true));
  backend->run_new_tokens(queue, view(q, 192), view(k, 192), view(v, 128), 0.0722f, false);
  return true;
}

void run_projection(const BackendEntry& entry, const Options& options, std::mt19937& rng) {
  auto backend = entry.factory(model_params(options));
  const std::int64_t t = options.tokens;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  Aligned<float> latents(static_cast<std::size_t>(t * latent_rank));
  for (std::int64_t i = 0; i < t * latent_rank; ++i) latents.data()[i] = value(rng);
  auto weight = random_bf16(static_cast<std::size_t>(options.heads) * 256 * latent_rank, rng);
  Aligned<std::uint16_t> k(static_cast<std::size_t>(t * options.heads * 192));
  Aligned<std::uint16_t> v(static_cast<std::size_t>(t * options.heads * 128));
  Queue queue = Queue::host();
  backend->project_latents(
      queue, TensorView::contiguous(latents.data(), DType::float32, {t, latent_rank}, MemoryKind::host),
      TensorView::contiguous(weight.data(), DType::bfloat16, {options.heads * 256, latent_rank}, MemoryKind::host),
      TensorView::contiguous(k.data(), DType::bfloat16, {t, options.heads, 192}, MemoryKind::host),
      TensorView::contiguous(v.data(), DType::bfloat16, {t, options.heads, 128}, MemoryKind::host));
}

// FLOPs of one key tile of an attention kernel whose name starts with
// `prefix`, from its tile table; 0 for other kernels.
double key_tile_flops(const std::string& kernel) {
  const auto tile = [](int rows, int cols) { return 2.0 * rows * cols * (192 + 128); };
  if (kernel.rfind("flash_forward<", 0) == 0) {
    const auto* c = cuda_flash::find_flash_tile_config(192, 128);
    return tile(c->block_rows, c->block_cols);
  }
  if (kernel.rfind("hopper_flash<", 0) == 0) {
    return tile(hopper_flash::block_rows, hopper_flash::find_hopper_tile_config(192, 128)->block_cols);
  }
  if (kernel.rfind("hip_flash_forward<", 0) == 0) {
    const auto* c = hip_flash::find_flash_tile_config(192, 128);
    return tile(c->block_rows(), c->block_cols);
  }
  return 0.0;
}

int report(const std::map<std::string, simt::KernelCost>& costs, const Options& options) {
  std::printf(
      "Emulated: one causal sequence of %d tokens, %d heads, qk 192 / v 128, bf16 (and float8_e4m3 inputs where the "
      "kernel's name says so); projection latent %d.\n\n",
      options.tokens, options.heads, latent_rank);
  std::printf(
      "| kernel | launches | blocks | tensor MFLOP | key tiles | shared wavefronts / key tile | bank-conflict replays "
      "| global KiB read / key tile | global sector use | exps / key tile | barriers / key tile | global bytes / FLOP "
      "| H100 on-chip "
      "bound TF/s | limited by | H100 HBM bound TF/s, uncached |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n");
  int status = 0;
  for (const auto& [kernel, c] : costs) {
    // Merges and HOPPER_FLASH's transpose of e4m3 V: no tensor work, plain loads and stores.
    if (c.tensor_flops == 0 && (kernel.find("merge") != std::string::npos || kernel.rfind("transpose_v", 0) == 0)) {
      continue;
    }
    const double flops = static_cast<double>(c.tensor_flops);
    const double per_tile = key_tile_flops(kernel);
    const double tiles = per_tile > 0 ? flops / per_tile : 0.0;
    // Per key tile; "-" for a kernel without key tiles (the projection),
    // "not seen" where the emulator saw none of it (plain loads and stores).
    const auto per = [&](double x, int decimals) {
      char text[32];
      if (tiles <= 0) return std::string("-");
      if (x == 0.0) return std::string("not seen");
      std::snprintf(text, sizeof text, "%.*f", decimals, x / tiles);
      return std::string(text);
    };
    const bool fp8 = kernel.find("float8_e4m3") != std::string::npos;
    const double t_tensor = flops / (fp8 ? peak_fp8_flops : peak_flops);
    const double t_shared = static_cast<double>(c.shared_wavefronts) / sm_clocks_per_s;
    const double t_exp = static_cast<double>(c.exps) / (exps_per_sm_clock * sm_clocks_per_s);
    const double t_hbm = static_cast<double>(c.global_read_bytes) / hbm_bytes_per_s;
    const double t = std::max({t_tensor, t_shared, t_exp});
    const char* limit = t == t_tensor ? "tensor cores" : t == t_shared ? "shared memory" : "ex2";
    // Requested bytes over the bytes of the sectors they touch: 100% when
    // every fetched byte is used.
    const double sector_use = c.global_sectors > 0 ? 100.0 * static_cast<double>(c.global_read_bytes) /
                                                         (32.0 * static_cast<double>(c.global_sectors))
                                                   : 0.0;
    char use[16] = "not seen";
    if (c.global_sectors > 0) std::snprintf(use, sizeof use, "%.0f%%", sector_use);
    std::printf("| %s | %llu | %llu | %.1f | %.0f | %s | %llu | %s | %s | %s | %s | %.4f | %.0f | %s | %s |\n",
                kernel.c_str(), static_cast<unsigned long long>(c.launches), static_cast<unsigned long long>(c.blocks),
                flops / 1e6, tiles, per(static_cast<double>(c.shared_wavefronts), 1).c_str(),
                static_cast<unsigned long long>(c.bank_conflict_replays()),
                per(static_cast<double>(c.global_read_bytes) / 1024.0, 1).c_str(), use,
                per(static_cast<double>(c.exps), 0).c_str(), per(static_cast<double>(c.barriers), 1).c_str(),
                flops > 0 ? static_cast<double>(c.global_read_bytes) / flops : 0.0, t > 0 ? flops / t / 1e12 : 0.0,
                limit, t_hbm > 0 ? std::to_string(static_cast<int>(flops / t_hbm / 1e12)).c_str() : "-");
    if (per_tile > 0 && c.bank_conflict_replays() > 0) {
      std::fprintf(stderr, "mla-gpu-model: %s has %llu bank-conflict replays\n", kernel.c_str(),
                   static_cast<unsigned long long>(c.bank_conflict_replays()));
      status = 1;
    }
  }
  std::printf(
      "\nNot seen by the emulator, so not counted: plain loads and stores (HIP_FLASH's LDS accesses, every "
      "kernel's output stores, and the transpose of V that HOPPER_FLASH's e4m3 launch runs first: 2 x tokens x "
      "heads x dv bytes), and HIP_FLASH's exponentials (the host's exp2f).\n");
  return status;
}

int run(const Options& options) {
  std::mt19937 rng(20261126);
  simt::reset_kernel_costs();
  simt::set_cost_counting(true);
  int expected = 0;
  for (const BackendEntry& entry : {simt::emulated_cuda_flash_entry(), simt::emulated_hopper_flash_entry()}) {
    expected += run_attention(entry, options, rng) ? 1 : 0;
  }
  expected += run_attention(simt::emulated_hopper_flash_entry(), options, rng, true) ? 1 : 0;
  if (simt::hip_flash_emulated_built()) {
    expected += run_attention(simt::emulated_hip_flash_entry(), options, rng) ? 1 : 0;
  } else {
    std::printf("HIP_FLASH not run: the build found no clang to compile the emulated HIP kernel\n\n");
  }
  run_projection(simt::emulated_cuda_flash_entry(), options, rng);
  ++expected;
  if (simt::hip_flash_emulated_built()) {
    run_projection(simt::emulated_hip_flash_entry(), options, rng);
    ++expected;
  }
  simt::set_cost_counting(false);
  const auto costs = simt::kernel_costs();
  int with_flops = 0;
  for (const auto& [kernel, c] : costs) with_flops += c.tensor_flops > 0 ? 1 : 0;
  const int status = report(costs, options);
  if (with_flops < expected) {
    std::fprintf(stderr, "mla-gpu-model: %d kernels counted tensor-core work, %d expected\n", with_flops, expected);
    return 1;
  }
  return status;
}

}  // namespace
}  // namespace mla::bench

int main(int argc, char** argv) {
  mla::bench::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--tokens" && i + 1 < argc) {
      options.tokens = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--heads" && i + 1 < argc) {
      options.heads = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: mla-gpu-model [--tokens N] [--heads H]\n");
      return 2;
    }
  }
  try {
    return mla::bench::run(options);
  } catch (const mla::Error& error) {
    std::fprintf(stderr, "mla-gpu-model: %s\n", error.what());
    return 1;
  }
}
