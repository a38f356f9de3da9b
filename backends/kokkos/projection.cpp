// The MLA step's up-projection on KOKKOS: keys and values = latents .
// kv_b_proj^T, on oneDNN's GEMM for float32 and bfloat16 keys in builds that
// have it (onednn_projection.hpp: 1.5 to 2.2 times the own GEMM's rate on
// fp32, 3 to 3.7 times on bf16 with its dot-product instructions, on an
// AVX-512 core; bench/results/cpu-projection-gemm-2026-11-26.md), else on the
// own GEMM below.
// MLA_KOKKOS_PROJECTION=own or =onednn overrides the choice.
//
// The own GEMM is register-blocked on the attention kernel's micro-GEMM
// (hot_loops.hpp), in the variant the CPU runs best (host_isa.hpp), one
// column panel per work item (host_parallel.hpp). Every output is one fp32
// sum over the latent index in order, computed by the same micro-GEMM for
// every block of tokens, the last one included (padded with zero rows): a
// token's keys and values do not depend on the other tokens of the call
// (batch invariance, docs/contract.md §6). The oneDNN path keeps the same
// promise by the same means (one GEMM shape, one thread per GEMM).
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "flash_attention.hpp"
#include "flash_config.hpp"
#include "host_parallel.hpp"
#include "hot_loops.hpp"
#include "mla/backend/latents.hpp"
#include "mla/error.hpp"
#if MLA_KOKKOS_WITH_ONEDNN
#include "onednn_projection.hpp"
#endif

namespace mla::kokkos {
namespace {

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

template <HostIsa kIsa>
void project_with(const TensorView& latents, const TensorView& w, const TensorView& k, const TensorView& v) {
  constexpr FlashTile kTile = flash_tile_for(kIsa);
  constexpr int kRows = kTile.block_rows;
  constexpr int kCols = kTile.block_cols;
  const std::int64_t tokens = latents.size(0), depth = latents.size(1);
  const std::int64_t columns = w.size(0);
  const ProjectedColumns out(w, k, v);
  // The latents as contiguous rows, in whole register blocks of tokens.
  const std::int64_t padded_tokens = round_up(tokens, kRows);
  std::vector<float> a(static_cast<std::size_t>(padded_tokens * depth), 0.0f);
  const auto* x = static_cast<const float*>(latents.data);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t l = 0; l < depth; ++l) {
      a[static_cast<std::size_t>(t * depth + l)] = x[t * latents.stride[0] + l * latents.stride[1]];
    }
  }
  const std::int64_t panels = round_up(columns, kCols) / kCols;
  for_each_item("mla_kokkos_project_latents", panels, [&](std::int64_t panel) {
    const std::int64_t c0 = panel * kCols;
    const std::int64_t cn = std::min<std::int64_t>(kCols, columns - c0);
    // kv_b_proj^T for this panel, [depth][kCols] in fp32; missing columns 0.
    std::vector<float> b(static_cast<std::size_t>(depth * kCols), 0.0f);
    for (std::int64_t c = 0; c < cn; ++c) {
      for (std::int64_t l = 0; l < depth; ++l) {
        b[static_cast<std::size_t>(l * kCols + c)] = load_as_float(w.data, w.dtype, w.offset(c0 + c, l));
      }
    }
    float block[kRows * kCols];
    for (std::int64_t t0 = 0; t0 < padded_tokens; t0 += kRows) {
      HotLoops<kIsa>::template micro_gemm<kRows, kCols>(
          a.data() + t0 * depth, static_cast<int>(depth), 1, static_cast<const float*>(b.data()), kCols,
          static_cast<int>(depth), static_cast<float*>(block), kCols, static_cast<const float*>(nullptr));
      const std::int64_t rows = std::min<std::int64_t>(kRows, tokens - t0);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cn; ++c) out.store(t0 + r, c0 + c, block[r * kCols + c]);
      }
    }
  });
}

void project_own(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k, const TensorView& v) {
#if MLA_KOKKOS_ISA_DISPATCH
  switch (selected_host_isa()) {
    case HostIsa::avx512:
      return project_with<HostIsa::avx512>(latents, kv_b_proj, k, v);
    case HostIsa::avx2:
      return project_with<HostIsa::avx2>(latents, kv_b_proj, k, v);
    case HostIsa::baseline:
      break;
  }
  project_with<HostIsa::baseline>(latents, kv_b_proj, k, v);
#else
  project_with<compiled_host_isa>(latents, kv_b_proj, k, v);
#endif
}

}  // namespace

ProjectionGemm requested_projection_gemm() {
  const char* value = std::getenv("MLA_KOKKOS_PROJECTION");
  if (value == nullptr || *value == '\0') return ProjectionGemm::automatic;
  const std::string name = value;
  if (name == "own") return ProjectionGemm::own;
  if (name == "onednn") return ProjectionGemm::onednn;
  raise(ErrorCategory::config,
        "MLA_KOKKOS_PROJECTION=" + name + " is not a KOKKOS projection GEMM; valid: own, onednn");
}

bool onednn_projection_built() {
#if MLA_KOKKOS_WITH_ONEDNN
  return true;
#else
  return false;
#endif
}

std::string projection_info() {
  switch (requested_projection_gemm()) {
    case ProjectionGemm::own:
      return "projection: own GEMM (set by MLA_KOKKOS_PROJECTION)";
    case ProjectionGemm::onednn:
      return onednn_projection_built() ? "projection: oneDNN (set by MLA_KOKKOS_PROJECTION)"
                                       : "projection: MLA_KOKKOS_PROJECTION=onednn, but this build has no oneDNN";
    case ProjectionGemm::automatic:
      break;
  }
  return onednn_projection_built() ? "projection: oneDNN for float32 and bfloat16, own GEMM for float16"
                                   : "projection: own GEMM (built without oneDNN)";
}

void project_latents(const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k, const TensorView& v) {
  const ProjectionGemm requested = requested_projection_gemm();
  if (latents.size(0) == 0 || kv_b_proj.size(0) == 0) return;
  if (requested == ProjectionGemm::onednn && !onednn_projection_built()) {
    raise(ErrorCategory::not_supported,
          "KOKKOS: MLA_KOKKOS_PROJECTION=onednn, but this build has no oneDNN (configure with libdnnl-dev installed)");
  }
#if MLA_KOKKOS_WITH_ONEDNN
  if (requested != ProjectionGemm::own) {
    const std::string why_not = project_latents_onednn(latents, kv_b_proj, k, v);
    if (why_not.empty()) return;
    if (requested == ProjectionGemm::onednn) {
      raise(ErrorCategory::not_supported,
            "KOKKOS: MLA_KOKKOS_PROJECTION=onednn cannot serve this projection: " + why_not);
    }
  }
#endif
  project_own(latents, kv_b_proj, k, v);
}

}  // namespace mla::kokkos
