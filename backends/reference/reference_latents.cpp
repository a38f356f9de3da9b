// REFERENCE's up-projection for the MLA step: every key and value summed in
// fp64 over the latent index, in order, and rounded once to k's dtype, so
// that the whole step, not only its attention, is the oracle. The gather
// needs no override: the default copies values (fp8 bytes times the cache
// scale) into float32, which holds each of them exactly or with one rounding.
#include <algorithm>
#include <vector>

#include "mla/backend/checks.hpp"
#include "mla/backend/latents.hpp"
#include "reference_backend.hpp"

namespace mla::reference {
namespace {

// A 2-d view's elements widened to double, row-major [rows, cols].
std::vector<double> widen(const TensorView& view) {
  const std::int64_t rows = view.size(0), cols = view.size(1);
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      values[static_cast<std::size_t>(i * cols + j)] = load_as_float(view.data, view.dtype, view.offset(i, j));
    }
  }
  return values;
}

}  // namespace

void ReferenceBackend::project_latents(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj,
                                       const TensorView& k, const TensorView& v) const {
  require_queue_kind(name(), "project_latents", {DeviceBackend::host}, queue);
  check_latent_projection(queue, latents, kv_b_proj, k, v);
  const std::int64_t tokens = latents.size(0), width = latents.size(1);
  const std::int64_t columns = kv_b_proj.size(0);
  const ProjectedColumns out(kv_b_proj, k, v);
  const std::vector<double> x = widen(latents), w = widen(kv_b_proj);
  // Eight columns at a time: eight independent sums, each still in order of l.
  constexpr std::int64_t tile = 8;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const double* row = x.data() + t * width;
    for (std::int64_t c0 = 0; c0 < columns; c0 += tile) {
      const std::int64_t cn = std::min(tile, columns - c0);
      double sum[tile] = {};
      for (std::int64_t l = 0; l < width; ++l) {
        for (std::int64_t c = 0; c < cn; ++c) sum[c] += row[l] * w[static_cast<std::size_t>((c0 + c) * width + l)];
      }
      for (std::int64_t c = 0; c < cn; ++c) out.store(t, c0 + c, static_cast<float>(sum[c]));
    }
  }
}

}  // namespace mla::reference
