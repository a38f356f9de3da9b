#include "split_kv.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "env_setting.hpp"
#include "mla/error.hpp"

namespace mla::gpu {

std::size_t split_scratch_bytes(int splits, std::int64_t rows, int v_head_dim) {
  const auto values = static_cast<std::size_t>(splits) * static_cast<std::size_t>(rows);
  const std::size_t lse_bytes = (values * sizeof(float) + 15) / 16 * 16;
  return lse_bytes + values * static_cast<std::size_t>(v_head_dim) * sizeof(float);
}

SplitChoice choose_kv_splits(const SplitRequest& r) {
  SplitChoice choice;
  int fit = 0;
  const int cap = std::min(r.max_splits, r.key_tiles);
  while (fit < cap && r.rows > 0 && split_scratch_bytes(fit + 1, r.rows, r.v_head_dim) <= r.scratch_bytes) ++fit;
  const std::string sizes = std::to_string(r.blocks) + " blocks, " + std::to_string(r.key_tiles) + " key tiles, " +
                            std::to_string(r.multiprocessors) + " multiprocessors";
  if (fit < 2) {
    choice.reason = "no split (" + sizes + "; " +
                    (r.key_tiles < 2 ? std::string("fewer than 2 key tiles")
                                     : "scratch of " + std::to_string(r.scratch_bytes) + " bytes holds " +
                                           std::to_string(fit) + " split(s)") +
                    ")";
    return choice;
  }
  if (r.forced > 0) {
    choice.splits = std::min(r.forced, fit);
    choice.reason = std::to_string(choice.splits) + " splits, MLA_KV_SPLITS=" + std::to_string(r.forced) + " (" +
                    sizes + ", scratch for " + std::to_string(fit) + ")";
    return choice;
  }
  if (r.blocks <= 0 || r.multiprocessors <= 0 || r.blocks * 5 >= static_cast<std::int64_t>(r.multiprocessors) * 4) {
    choice.reason = "no split (" + sizes + ": the blocks fill the device)";
    return choice;
  }
  const int most = std::min(fit, r.multiprocessors);
  const auto tiles_per_split = [&](int s) { return (r.key_tiles + s - 1) / s; };
  const auto eligible = [&](int s) { return s == 1 || tiles_per_split(s) != tiles_per_split(s - 1); };
  std::vector<double> efficiency(static_cast<std::size_t>(most) + 1, 0.0);
  double best = 0.0;
  for (int s = 1; s <= most; ++s) {
    if (!eligible(s)) continue;
    const double waves = static_cast<double>(r.blocks) * s / r.multiprocessors;
    efficiency[static_cast<std::size_t>(s)] = waves / std::ceil(waves);
    best = std::max(best, efficiency[static_cast<std::size_t>(s)]);
  }
  for (int s = 1; s <= most; ++s) {
    if (eligible(s) && efficiency[static_cast<std::size_t>(s)] >= 0.85 * best) {
      choice.splits = s;
      break;
    }
  }
  choice.reason = std::to_string(choice.splits) + " splits (" + sizes + ", scratch for " + std::to_string(fit) + ")";
  return choice;
}

int forced_kv_splits(int max_splits) { return whole_number_setting("MLA_KV_SPLITS", max_splits); }

}  // namespace mla::gpu
