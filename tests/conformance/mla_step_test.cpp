// The whole MLA prefill step (plan_mla_prefill, then run_mla_prefill) on the
// backend under test against an fp64 oracle written here: gather from the
// paged cache, the kv_b_proj up-projection, and causal attention over
// context + new tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance_fixture.hpp"
#include "error_message.hpp"
#include "log_capture.hpp"
#include "mla/attention_mask.hpp"
#include "mla/backend/latents.hpp"

namespace mla::testing {
namespace {

// One step's inputs on the host.
struct Step {
  std::vector<int> q_lens, context_lens;
  int block_size = 16;
  bool fp8_cache = false;
  float cache_scale = 0.5f;
  MlaStepMetadata metadata;
  HostTensor q, kv_c, k_pe, cache, w;
};

// A step's §12 mask as the oracle reads it: key t of sequence b's whole
// range (context, then new tokens) seen by its query i when allowed(b, i, t)
// (empty: every key), within the window, and the heads' sinks.
struct StepMask {
  std::function<bool(std::size_t b, int i, int t)> allowed;
  std::int64_t window = 0;
  std::vector<float> sinks;
};

class MlaStep : public Conformance {
 protected:
  int latent() const { return params_.kv_lora_rank; }
  int p() const { return GetParam().dims.qk_nope_head_dim; }
  int r() const { return GetParam().dims.qk_rope_head_dim; }

  // Random inputs; the cache's blocks are handed out in shuffled order, with
  // spare blocks no sequence uses.
  Step make_step(std::vector<int> q_lens, std::vector<int> context_lens, int block_size, bool fp8 = false) {
    const int latent_dim = latent();
    Step s;
    s.q_lens = std::move(q_lens);
    s.context_lens = std::move(context_lens);
    s.block_size = block_size;
    s.fp8_cache = fp8;
    const std::size_t batch = s.q_lens.size();
    s.metadata.cu_seqlens_q.assign(1, 0);
    for (int len : s.q_lens) s.metadata.cu_seqlens_q.push_back(s.metadata.cu_seqlens_q.back() + len);
    int max_blocks = 1;
    int used = 0;
    for (int c : s.context_lens) {
      max_blocks = std::max(max_blocks, (c + block_size - 1) / block_size + 1);
      used += (c + block_size - 1) / block_size;
    }
    const int num_blocks = used + 3;
    std::vector<std::int32_t> order(static_cast<std::size_t>(num_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    s.metadata.max_blocks = max_blocks;
    s.metadata.block_table.assign(batch * static_cast<std::size_t>(max_blocks), num_blocks - 1);
    std::size_t next = 0;
    for (std::size_t b = 0; b < batch; ++b) {
      s.metadata.context_lens.push_back(s.context_lens[b]);
      for (int j = 0; j < (s.context_lens[b] + block_size - 1) / block_size; ++j) {
        s.metadata.block_table[b * static_cast<std::size_t>(max_blocks) + static_cast<std::size_t>(j)] = order[next++];
      }
    }
    const std::int64_t nq = s.metadata.cu_seqlens_q.back();
    // In the compute dtype: the FP8 attention mode's output dtype (its q is quantised by the test).
    const auto random_compute = [&](std::vector<std::int64_t> shape, float lo, float hi) {
      HostTensor tensor(compute_dtype(), std::move(shape));
      tensor.fill_random(rng_, lo, hi);
      return tensor;
    };
    s.q = random_compute({nq, heads(), p() + r()}, -1.0f, 1.0f);
    s.kv_c = random_compute({nq, latent_dim}, -1.0f, 1.0f);
    s.k_pe = random_compute({nq, r()}, -1.0f, 1.0f);
    s.cache = HostTensor(fp8 ? DType::float8_e4m3 : compute_dtype(), {num_blocks, block_size, latent_dim + r()});
    s.cache.fill_random(rng_, -1.5f, 1.5f);
    // kv_b_proj in the compute dtype, as engines keep it (the projection test covers float32 weights).
    s.w = HostTensor(compute_dtype(), {std::int64_t{heads()} * (p() + v_dim()), latent_dim});
    s.w.fill_random(rng_, -0.3f, 0.3f);
    return s;
  }

  // The dtype of the latents, projection and output: the shape's dtype, or
  // the output dtype of the FP8 attention mode.
  DType compute_dtype() const { return params_.output_dtype(); }

  // What the FP8 attention mode does to a projected key or value (the oracle
  // computes them in fp64): kept in the compute dtype, divided by its
  // attention call's scale, rounded to e4m3 (saturating) and multiplied
  // back. Each call's scales are the step's reported ones; `phase_of` says
  // which call read sequence b's key t (t < c: context, else new).
  struct Fp8Keys {
    std::vector<KvScales> scales;                 // per attention call: the new tokens, then each chunk
    std::vector<std::vector<int>> context_phase;  // [b][t]: the call that read context token t
    double q_descale = 1.0;
    // Filled by the oracle: per call, the largest |stored key (value) / scale|,
    // 448 where the scale is amax / 448 of the call's keys (values).
    mutable std::vector<KvScales> largest_ratio;
  };

  // The step in fp64: out [Nq, H, V] and lse [H, Nq]; with `fp8`, the FP8
  // attention mode's (q as its bytes times the descale, keys and values
  // quantised as Fp8Keys says).
  void oracle(const Step& s, std::vector<double>& out, std::vector<double>& lse, const Fp8Keys* fp8 = nullptr,
              const StepMask* mask = nullptr) const {
    const int h_count = heads(), P = p(), R = r(), V = v_dim(), L = latent();
    const std::int64_t nq = s.metadata.cu_seqlens_q.back();
    const double scale = scale_;
    const double cache_scale = s.fp8_cache ? s.cache_scale : 1.0;
    out.assign(static_cast<std::size_t>(nq * h_count * V), 0.0);
    lse.assign(static_cast<std::size_t>(h_count * nq), -INFINITY);
    // Latent and rope rows (flat: L and R per token) of each sequence's c
    // context tokens, then of its sq new ones; keys and values of one head.
    std::vector<double> xs, ropes, keys, values;
    const auto add_token = [&](const auto& latent, const auto& rope) {
      for (int l = 0; l < L; ++l) xs.push_back(latent(l));
      for (int j = 0; j < R; ++j) ropes.push_back(rope(j));
    };
    for (std::size_t b = 0; b < s.q_lens.size(); ++b) {
      const int c = s.context_lens[b], sq = s.q_lens[b];
      const int q0 = s.metadata.cu_seqlens_q[b];
      xs.clear();
      ropes.clear();
      for (int i = 0; i < c; ++i) {
        const std::int64_t block = s.metadata.block_table[b * static_cast<std::size_t>(s.metadata.max_blocks) +
                                                          static_cast<std::size_t>(i / s.block_size)];
        const int slot = i % s.block_size;
        add_token([&](int l) { return s.cache.at(block, slot, l) * cache_scale; },
                  [&](int j) { return s.cache.at(block, slot, L + j) * cache_scale; });
      }
      for (int i = 0; i < sq; ++i) {
        add_token([&](int l) { return double{s.kv_c.at(q0 + i, l)}; },
                  [&](int j) { return double{s.k_pe.at(q0 + i, j)}; });
      }
      const int tokens = c + sq;
      for (int h = 0; h < h_count; ++h) {
        keys.assign(static_cast<std::size_t>(tokens * (P + R)), 0.0);
        values.assign(static_cast<std::size_t>(tokens * V), 0.0);
        for (int t = 0; t < tokens; ++t) {
          for (int j = 0; j < P + V; ++j) {
            double sum = 0;
            for (int l = 0; l < L; ++l) sum += xs[static_cast<std::size_t>(t * L + l)] * s.w.at(h * (P + V) + j, l);
            if (j < P) {
              keys[static_cast<std::size_t>(t * (P + R) + j)] = sum;
            } else {
              values[static_cast<std::size_t>(t * V + j - P)] = sum;
            }
          }
          for (int j = 0; j < R; ++j) {
            keys[static_cast<std::size_t>(t * (P + R) + P + j)] = ropes[static_cast<std::size_t>(t * R + j)];
          }
          if (fp8 != nullptr) {
            const std::size_t phase =
                t < c ? static_cast<std::size_t>(fp8->context_phase[b][static_cast<std::size_t>(t)]) : 0;
            const KvScales& call = fp8->scales.at(phase);
            fp8->largest_ratio.resize(fp8->scales.size(), KvScales{0.0f, 0.0f});
            KvScales& largest = fp8->largest_ratio[phase];
            const auto quantised = [&](double x, float kv_scale, float& ratio) {
              const float stored = round_to_dtype(static_cast<float>(x), compute_dtype());
              ratio = std::max(ratio, std::fabs(stored / kv_scale));
              return double{round_to_dtype(stored / kv_scale, DType::float8_e4m3)} * kv_scale;
            };
            for (int d = 0; d < P + R; ++d) {
              double& key = keys[static_cast<std::size_t>(t * (P + R) + d)];
              key = quantised(key, call.k, largest.k);
            }
            for (int d = 0; d < V; ++d) {
              double& value = values[static_cast<std::size_t>(t * V + d)];
              value = quantised(value, call.v, largest.v);
            }
          }
        }
        for (int i = 0; i < sq; ++i) {
          const int visible = c + i + 1;
          // Query i sits at position c + i; a masked-out key weighs nothing.
          const auto seen = [&](int t) {
            if (mask == nullptr) return true;
            if (mask->window != 0 && t <= c + i - mask->window) return false;
            return !mask->allowed || mask->allowed(b, i, t);
          };
          std::vector<double> scores(static_cast<std::size_t>(visible), -INFINITY);
          for (int t = 0; t < visible; ++t) {
            if (!seen(t)) continue;
            double dot = 0;
            for (int d = 0; d < P + R; ++d)
              dot += s.q.at(q0 + i, h, d) * keys[static_cast<std::size_t>(t * (P + R) + d)];
            scores[static_cast<std::size_t>(t)] = dot * scale * (fp8 != nullptr ? fp8->q_descale : 1.0);
          }
          const double m = *std::max_element(scores.begin(), scores.end());
          if (m == -INFINITY) continue;  // no key seen: out 0, LSE -inf
          double total = 0;
          for (double& score : scores) total += (score = std::exp(score - m));
          // A sink joins the divisor only (§12).
          const double sink =
              mask != nullptr && !mask->sinks.empty() ? mask->sinks[static_cast<std::size_t>(h)] : -INFINITY;
          const double divisor = total + std::exp(sink - m);
          for (int d = 0; d < V; ++d) {
            double acc = 0;
            for (int t = 0; t < visible; ++t)
              acc += scores[static_cast<std::size_t>(t)] * values[static_cast<std::size_t>(t * V + d)];
            out[static_cast<std::size_t>(((q0 + i) * h_count + h) * V + d)] = acc / divisor;
          }
          lse[static_cast<std::size_t>(h * nq + q0 + i)] = m + std::log(total);
        }
      }
    }
  }

  MlaStepPlan plan(const Step& s, std::int64_t workspace_tokens) const {
    return plan_mla_prefill(params_, s.metadata, s.block_size, workspace_tokens);
  }

  // A StepMask on the queue: its bits (vLLM's layout over the plan's whole
  // key ranges), window and sinks.
  struct QueueMask {
    UsmBuffer words;
    DeviceTensor sinks;
    AttentionMask mask;
  };
  QueueMask queue_mask(const Step& s, const MlaStepPlan& plan, const StepMask& mask) {
    QueueMask q;
    q.mask.window = mask.window;
    if (mask.allowed) {
      HostTopkMask bits(plan.attention);
      for (std::size_t b = 0; b < s.q_lens.size(); ++b) {
        for (int i = 0; i < s.q_lens[b]; ++i) {
          for (int t = 0; t < s.context_lens[b] + s.q_lens[b]; ++t) {
            if (mask.allowed(b, i, t)) bits.allow(static_cast<int>(b), i, t);
          }
        }
      }
      const TopkMask view = bits.view();
      const auto bytes = static_cast<std::size_t>(view.batch_size * view.batch_stride) * sizeof(std::uint32_t);
      q.words = UsmBuffer::device(queue_, std::max<std::size_t>(bytes, 64));
      queue_.memcpy(q.words.get(), view.words, bytes);
      queue_.wait();
      q.mask.topk =
          TopkMask::contiguous(q.words.as<const std::uint32_t>(), view.batch_size, view.rows, view.words_per_row,
                               queue_.backend() == DeviceBackend::host ? MemoryKind::host : MemoryKind::device);
    }
    if (!mask.sinks.empty()) {
      HostTensor sinks(DType::float32, {static_cast<std::int64_t>(mask.sinks.size())});
      for (std::size_t h = 0; h < mask.sinks.size(); ++h) sinks.set(mask.sinks[h], static_cast<std::int64_t>(h));
      q.sinks = upload(queue_, sinks);
      q.mask.sinks = q.sinks.view;
    }
    return q;
  }

  // Runs the step on the backend under test with `workspace` tokens and
  // compares with the oracle.
  ::testing::AssertionResult matches_oracle(Step& s, std::int64_t workspace) {
    return matches_oracle(s, plan(s, workspace), "workspace " + std::to_string(workspace));
  }
  // The step on the backend under test, everything on its queue and the
  // outputs starting as NaN poison: out and lse copied back. The FP8
  // attention mode's inputs come from `fp8_inputs` and its reported scales
  // go to `scales`.
  struct StepResult {
    HostTensor out, lse;
  };
  StepResult run_step(const Step& s, const MlaStepPlan& plan, const MlaStepInputs* fp8_inputs = nullptr,
                      std::vector<KvScales>* scales = nullptr, const AttentionMask& mask = {}) {
    const std::int64_t nq = s.metadata.cu_seqlens_q.back();
    StepResult result{HostTensor(compute_dtype(), {nq, heads(), v_dim()}), HostTensor(DType::float32, {heads(), nq})};
    const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
    const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
    const DeviceTensor d_out = upload(queue_, result.out), d_lse = upload(queue_, result.lse);
    MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, s.cache_scale, w.view};
    if (fp8_inputs != nullptr) {
      in.q_descale = fp8_inputs->q_descale;
      in.k_scale = fp8_inputs->k_scale;
      in.v_scale = fp8_inputs->v_scale;
    }
    in.mask = mask;
    run_mla_prefill(*backend_, queue_, plan, in, {d_out.view, d_lse.view, scales}, {}, scale_);
    download(queue_, d_out, result.out);
    download(queue_, d_lse, result.lse);
    return result;
  }

  // `mask`: the step's §12 mask, built on the queue from the oracle's.
  ::testing::AssertionResult matches_oracle(Step& s, const MlaStepPlan& plan, const std::string& what,
                                            const StepMask* mask = nullptr) {
    const std::int64_t nq = s.metadata.cu_seqlens_q.back();
    StepResult result;
    if (mask == nullptr) {
      result = run_step(s, plan);
    } else {
      const QueueMask on_queue = queue_mask(s, plan, *mask);
      result = run_step(s, plan, nullptr, nullptr, on_queue.mask);
    }
    const HostTensor& out = result.out;
    const HostTensor& lse = result.lse;
    std::vector<double> want_out, want_lse;
    oracle(s, want_out, want_lse, nullptr, mask);
    double err = 0, norm = 0, lse_err = 0;
    for (std::int64_t t = 0; t < nq; ++t) {
      for (int h = 0; h < heads(); ++h) {
        for (int d = 0; d < v_dim(); ++d) {
          const double want = want_out[static_cast<std::size_t>((t * heads() + h) * v_dim() + d)];
          const double got = out.at(t, h, d);
          if (std::isnan(got)) return ::testing::AssertionFailure() << "NaN at token " << t;
          err += (got - want) * (got - want);
          norm += want * want;
        }
        // A NaN must fail, not vanish in a max; a row without keys is -inf exactly.
        const double got_lse = lse.at(h, t);
        const double want = want_lse[static_cast<std::size_t>(h * nq + t)];
        if (std::isinf(want) ? got_lse != want : !std::isfinite(got_lse)) {
          return ::testing::AssertionFailure() << "LSE " << got_lse << " where " << want << " is due, head " << h
                                               << " token " << t << " (" << what << ")";
        }
        if (!std::isinf(want)) lse_err = std::max(lse_err, std::abs(got_lse - want));
      }
    }
    const double relative = std::sqrt(err / std::max(norm, 1e-30));
    const Tolerance tol = tolerance();
    if (relative > tol.out_relative || lse_err > tol.lse_absolute) {
      return ::testing::AssertionFailure()
             << "relative error " << relative << ", LSE error " << lse_err << " (" << what << ")";
    }
    return ::testing::AssertionSuccess();
  }
};

TEST_P(MlaStep, SequencesWithAndWithoutContextMatchTheOracle) {
  Step s = make_step({5, 0, 9, 3, 1}, {21, 7, 0, 40, 0}, 16);
  EXPECT_TRUE(matches_oracle(s, 1 << 20));
}

TEST_P(MlaStep, EveryBlockSizeAndBudgetGivesTheSameStep) {
  for (int block : {1, 16, 64}) {
    Step s = make_step({4, 6, 2}, {30, 0, 71}, block);
    for (std::int64_t workspace : {std::int64_t{block}, std::int64_t{2 * block + 1}, std::int64_t{101 + block}}) {
      EXPECT_TRUE(matches_oracle(s, workspace)) << "block " << block;
    }
  }
}

// A packed plan: three sequences' contexts share the first chunk and the
// longest runs over both, cut in the middle of a block.
TEST_P(MlaStep, PackedChunksMatchTheOracle) {
  Step s = make_step({4, 3, 5, 2}, {10, 0, 12, 30}, 16);
  const MlaStepPlan packed =
      plan_mla_prefill(params_, s.metadata, s.block_size, pack_context_chunks(s.metadata.context_lens, 35));
  ASSERT_EQ(packed.num_chunks(), 2u);
  int sharing = 0;
  for (std::size_t b = 0; b < 4; ++b) sharing += packed.context.chunks[0].length(b) > 0 ? 1 : 0;
  EXPECT_EQ(sharing, 3) << "sequences in the first chunk";
  EXPECT_EQ(packed.context.chunks[0].length(3), 13);
  EXPECT_EQ(packed.context.chunks[1].length(3), 17);
  EXPECT_EQ(packed.slot_offsets, (std::vector<std::int64_t>{0, 35, 52}));
  EXPECT_TRUE(matches_oracle(s, packed, "packed"));
  // One token per chunk: the most chunks a step can have.
  EXPECT_TRUE(matches_oracle(
      s, plan_mla_prefill(params_, s.metadata, s.block_size, pack_context_chunks(s.metadata.context_lens, 1)),
      "packed, one token per chunk"));
}

// §12 through the whole step: a top-k mask over context and new tokens (one
// sequence's first context chunk hidden from every query, one query that
// sees nothing), a window and sinks, over one chunk and over several, where
// the sinks must be applied once.
TEST_P(MlaStep, MasksWindowsAndSinksMatchTheOracle) {
  if (!backend_->takes_attention_masks()) GTEST_SKIP() << backend_->name() << " takes no masks (§12)";
  Step s = make_step({5, 0, 9, 3, 1}, {21, 7, 0, 40, 0}, 16);
  std::vector<std::vector<std::vector<char>>> drawn(s.q_lens.size());
  for (std::size_t b = 0; b < s.q_lens.size(); ++b) {
    for (int i = 0; i < s.q_lens[b]; ++i) {
      std::vector<char>& row = drawn[b].emplace_back();
      for (int t = 0; t < s.context_lens[b] + s.q_lens[b]; ++t) {
        const bool hidden = (b == 3 && t < 16) || (b == 2 && i == 4);
        row.push_back(!hidden && std::bernoulli_distribution(0.5)(rng_) ? 1 : 0);
      }
    }
  }
  StepMask mask;
  mask.allowed = [&drawn](std::size_t b, int i, int t) {
    return drawn[b][static_cast<std::size_t>(i)][static_cast<std::size_t>(t)] != 0;
  };
  const float cycle[] = {0.5f, -std::numeric_limits<float>::infinity(), 3.0f, -2.0f};
  for (int h = 0; h < heads(); ++h) mask.sinks.push_back(cycle[h % 4]);
  for (const std::int64_t window : {std::int64_t{0}, std::int64_t{13}}) {
    mask.window = window;
    for (const std::int64_t workspace : {std::int64_t{1} << 20, std::int64_t{16}}) {
      EXPECT_TRUE(matches_oracle(s, plan(s, workspace),
                                 "window " + std::to_string(window) + ", workspace " + std::to_string(workspace),
                                 &mask));
    }
  }
}

// A mask's positions follow each sequence's context chunk after chunk: a
// plan whose chunks run out of order is refused before the step runs.
TEST_P(MlaStep, AMaskNeedsTheChunksInOrder) {
  if (!backend_->takes_attention_masks()) GTEST_SKIP() << backend_->name() << " takes no masks (§12)";
  Step s = make_step({3, 2}, {40, 20}, 16);
  ContextPlan reversed = plan_context_chunks(s.metadata.context_lens, 32, s.block_size);
  ASSERT_GT(reversed.chunks.size(), 1u);
  std::reverse(reversed.chunks.begin(), reversed.chunks.end());
  std::reverse(reversed.chunk_size.begin(), reversed.chunk_size.end());
  const MlaStepPlan plan = plan_mla_prefill(params_, s.metadata, s.block_size, reversed);
  StepMask mask;
  mask.window = 7;
  const QueueMask on_queue = queue_mask(s, plan, mask);
  try {
    run_step(s, plan, nullptr, nullptr, on_queue.mask);
    ADD_FAILURE() << "a mask over out-of-order chunks was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("context chunks in order"), std::string::npos) << e.what();
  }
}

TEST_P(MlaStep, Fp8CacheIsDequantisedByItsScale) {
  Step s = make_step({3, 5}, {19, 33}, 16, true);
  s.cache_scale = 0.25f;
  EXPECT_TRUE(matches_oracle(s, 24));
}

TEST_P(MlaStep, BadBlockTablesAndShapesAreClearErrors) {
  Step s = make_step({2}, {20}, 16);
  HostTensor out(dtype(), {2, heads(), v_dim()});
  const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), d_out = upload(queue_, out);
  const auto message = [&](const Step& step, const HostTensor& w) {
    return invalid_argument_message([&] {
      const DeviceTensor d_w = upload(queue_, w);
      MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, 1.0f, d_w.view};
      run_mla_prefill(*backend_, queue_, plan(step, 64), in, {d_out.view, {}}, {}, scale_);
    });
  };
  Step bad_block = s;
  bad_block.metadata.block_table[1] = 1000;
  EXPECT_NE(message(bad_block, s.w).find("block_table[0][1] = 1000 is not a block of the cache"), std::string::npos);
  Step too_long = s;
  too_long.metadata.context_lens[0] = 16 * too_long.metadata.max_blocks + 1;
  const std::string planned = message(too_long, s.w);  // found when the step is planned
  EXPECT_EQ(planned.rfind("plan_mla_prefill: sequence 0 has", 0), 0u) << planned;
  EXPECT_NE(planned.find("holds"), std::string::npos) << planned;
  HostTensor wrong_w(DType::float32, {3, latent()});
  EXPECT_NE(message(s, wrong_w).find("kv_b_proj dimension 0 is 3"), std::string::npos);
  // A grouped cache format (§13) for latents it does not hold.
  const std::string grouped = invalid_argument_message([&] {
    const DeviceTensor d_w = upload(queue_, s.w);
    MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, 1.0f, d_w.view};
    in.cache_format = CacheFormat::fp8_ds_mla;
    run_mla_prefill(*backend_, queue_, plan(s, 64), in, {d_out.view, {}}, {}, scale_);
  });
  EXPECT_NE(grouped.find("cache_format fp8_ds_mla holds 512 latents and 64 rope values; got 64 and "),
            std::string::npos)
      << grouped;
}

// The plan is the one source of kv_lora_rank, block_size, heads, dims and
// dtype: a backend or a tensor that disagrees is an error naming both values.
TEST_P(MlaStep, ABackendOrTensorUnlikeThePlanIsAnErrorNamingBoth) {
  Step s = make_step({3}, {20}, 16);
  const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
  const DeviceTensor out = upload(queue_, HostTensor(dtype(), {3, heads(), v_dim()}));
  const MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, 1.0f, w.view};
  const auto message = [&](const MlaStepPlan& plan) {
    return invalid_argument_message([&] { run_mla_prefill(*backend_, queue_, plan, in, {out.view, {}}, {}, scale_); });
  };
  EXPECT_EQ(message(plan(s, 64)), "no error");
  BackendParams other = params_;
  other.kv_lora_rank = latent() / 2;
  EXPECT_EQ(message(plan_mla_prefill(other, s.metadata, s.block_size, 64)),
            "run_mla_prefill: the backend was built for kv_lora_rank " + std::to_string(latent()) +
                " but the plan for " + std::to_string(latent() / 2));
  other = params_;
  other.num_heads = heads() + 1;
  EXPECT_NE(message(plan_mla_prefill(other, s.metadata, s.block_size, 64)).find("the backend was built for num_heads"),
            std::string::npos);
  const std::string block = message(plan_mla_prefill(params_, s.metadata, 8, 64));
  EXPECT_NE(block.find("cache dimension 1 is 16, but the plan's block_size is 8"), std::string::npos) << block;
}

// The step's out, lse and workspace must not share memory with what it reads.
TEST_P(MlaStep, OutputsOverlappingInputsAreRefused) {
  Step s = make_step({2}, {20}, 16);
  const DeviceTensor kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
  // q [2, H, P+R] and out [2, H, V] as column ranges of one buffer that share column P+R-1.
  const std::int64_t row = p() + r() + v_dim();
  OwnedTensor both = OwnedTensor::device(queue_, dtype(), {2, heads(), row});
  TensorView q = both.view, out = both.view;
  q.shape[2] = p() + r();
  out.shape[2] = v_dim();
  out.data = static_cast<std::byte*>(both.view.data) + (p() + r() - 1) * static_cast<std::int64_t>(dtype_size(dtype()));
  OwnedTensor apart = OwnedTensor::device(queue_, dtype(), {2, heads(), v_dim()});
  const MlaStepInputs in{q, kv_c.view, k_pe.view, cache.view, 1.0f, w.view};
  const auto message = [&](const MlaStepOutputs& outputs, const Workspace& workspace) {
    return invalid_argument_message(
        [&] { run_mla_prefill(*backend_, queue_, plan(s, 64), in, outputs, workspace, scale_); });
  };
  EXPECT_NE(message({out, {}}, {}).find("run_mla_prefill: out overlaps q"), std::string::npos);
  const TensorView lse_in_k_pe =
      TensorView::contiguous(k_pe.view.data, DType::float32, {heads(), 2}, MemoryKind::device);
  EXPECT_NE(message({apart.view, lse_in_k_pe}, {}).find("run_mla_prefill: lse overlaps k_pe"), std::string::npos);
  // No larger than the cache, so that it overlaps nothing else: the overlap is
  // found before the workspace's size is checked.
  const std::string in_cache = message({apart.view, {}}, {cache.view.data, cache.buffer.bytes()});
  EXPECT_NE(in_cache.find("run_mla_prefill: workspace overlaps cache"), std::string::npos) << in_cache;
}

// The up-projection alone, on an odd shape (13 tokens, L = 37), with
// kv_b_proj in float32 and in the compute dtype (on CUDA_FLASH in bf16 and
// fp16: the own tensor-core kernel, then cuBLASLt): within the step's bounds
// of an fp64 sum, and batch invariant: each token's keys and values are
// bitwise the same when it is projected with fewer neighbours.
TEST_P(MlaStep, ProjectionMatchesFp64AndIsBatchInvariant) {
  constexpr int tokens = 13, latent = 37, fewer = 5;
  const int P = p(), R = r(), V = v_dim(), H = heads();
  HostTensor x(DType::float32, {tokens, latent});
  x.fill_random(rng_, -1.0f, 1.0f);
  std::vector<DType> weight_dtypes{DType::float32};
  if (dtype() != DType::float32) weight_dtypes.push_back(dtype());
  for (DType weight_dtype : weight_dtypes) {
    SCOPED_TRACE("kv_b_proj " + std::string(dtype_name(weight_dtype)));
    HostTensor w(weight_dtype, {std::int64_t{H} * (P + V), latent});
    w.fill_random(rng_, -0.5f, 0.5f);
    const DeviceTensor dx = upload(queue_, x), dw = upload(queue_, w);
    const auto project = [&](std::int64_t rows, HostTensor& k, HostTensor& v) {
      TensorView xs = dx.view;
      xs.shape[0] = rows;
      const DeviceTensor dk = upload(queue_, k), dv = upload(queue_, v);
      backend_->project_latents(queue_, xs, dw.view, dk.view, dv.view);
      download(queue_, dk, k);
      download(queue_, dv, v);
    };
    HostTensor k(dtype(), {tokens, H, P + R}), v(dtype(), {tokens, H, V});
    project(tokens, k, v);
    HostTensor k_few(dtype(), {fewer, H, P + R}), v_few(dtype(), {fewer, H, V});
    project(fewer, k_few, v_few);
    double err = 0, norm = 0;
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < H; ++h) {
        for (int j = 0; j < P + V; ++j) {
          double want = 0;
          for (int l = 0; l < latent; ++l) want += double{x.at(t, l)} * w.at(h * (P + V) + j, l);
          const double got = j < P ? k.at(t, h, j) : v.at(t, h, j - P);
          err += (got - want) * (got - want);
          norm += want * want;
          if (t < fewer) {
            const float alone = j < P ? k_few.at(t, h, j) : v_few.at(t, h, j - P);
            ASSERT_EQ(alone, static_cast<float>(got)) << "token " << t << ", head " << h << ", column " << j;
          }
        }
        // The rope part of k is the gather's: the projection leaves it alone.
        for (int j = 0; j < R; ++j) ASSERT_TRUE(std::isnan(k.at(t, h, P + j))) << "rope column " << j << " written";
      }
    }
    EXPECT_LE(std::sqrt(err / norm), tolerance().out_relative) << "relative error of the projection";
  }
}

// Latents in the backend's latent_dtype: where it is the compute dtype (the
// GPU flash backends, bf16 and fp16), gathering into such latents rounds the
// float32 gather's values, and projecting from them gives the float32
// latents' bits, whichever GEMM runs (every projection rounds its latents to
// the compute dtype). Elsewhere such latents are a clear error.
TEST_P(MlaStep, LatentsInTheBackendsDtypeGiveTheFloat32Bits) {
  if (dtype() == DType::float32) GTEST_SKIP() << "float32 keys take float32 latents only";
  constexpr int tokens = 11, latent = 40;
  const int P = p(), R = r(), V = v_dim(), H = heads();
  // Float32 sources (the GPU gather wants kv_c and k_pe in one dtype), so
  // that the latents are not already representable in the compute dtype.
  HostTensor kv_c(DType::float32, {tokens, latent}), k_pe(DType::float32, {tokens, R});
  kv_c.fill_random(rng_, -1.0f, 1.0f);
  k_pe.fill_random(rng_, -1.0f, 1.0f);
  HostTensor w(dtype(), {std::int64_t{H} * (P + V), latent});
  w.fill_random(rng_, -0.5f, 0.5f);
  const DeviceTensor dkv_c = upload(queue_, kv_c), dk_pe = upload(queue_, k_pe), dw = upload(queue_, w);
  LatentGather gather;
  gather.kv_c = dkv_c.view;
  gather.k_pe = dk_pe.view;
  gather.tokens = tokens;
  // Gathers into latents of `latent_dtype`, then projects them.
  const auto step = [&](DType latent_dtype, HostTensor& x, HostTensor& k, HostTensor& v) {
    x = HostTensor(latent_dtype, {tokens, latent});
    const DeviceTensor dx = upload(queue_, x), dk = upload(queue_, k), dv = upload(queue_, v);
    backend_->gather_latents(queue_, gather, dx.view, dk.view);
    backend_->project_latents(queue_, dx.view, dw.view, dk.view, dv.view);
    download(queue_, dx, x);
    download(queue_, dk, k);
    download(queue_, dv, v);
  };
  HostTensor x32, k32(dtype(), {tokens, H, P + R}), v32(dtype(), {tokens, H, V});
  step(DType::float32, x32, k32, v32);
  const DType own = backend_->latent_dtype(dtype());
  if (own == DType::float32) {
    HostTensor x(dtype(), {tokens, latent});
    const DeviceTensor dx = upload(queue_, x), dk = upload(queue_, k32), dv = upload(queue_, v32);
    try {
      backend_->project_latents(queue_, dx.view, dw.view, dk.view, dv.view);
      ADD_FAILURE() << dtype_name(dtype()) << " latents were accepted by " << backend_->name();
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(std::string(error.what()).find("project_latents: latents must be float32 on this backend"),
                std::string::npos)
          << error.what();
    }
    return;
  }
  ASSERT_EQ(own, dtype());
  HostTensor x, k(dtype(), {tokens, H, P + R}), v(dtype(), {tokens, H, V});
  step(own, x, k, v);
  for (int t = 0; t < tokens; ++t) {
    for (int l = 0; l < latent; ++l) {
      HostTensor rounded(dtype(), {1});
      rounded.set(x32.at(t, l), 0);
      ASSERT_EQ(x.at(t, l), rounded.at(0)) << "latent " << l << " of token " << t;
    }
  }
  EXPECT_EQ(std::memcmp(k.storage(), k32.storage(), k.storage_bytes()), 0) << "keys differ";
  EXPECT_EQ(std::memcmp(v.storage(), v32.storage(), v.storage_bytes()), 0) << "values differ";
}

// An engine's workspace: plan once, then run into the caller's out, lse and
// a workspace of exactly the plan's workspace_bytes. Every run equals the
// allocating one bit for bit and allocates nothing on the queue, the first
// included; a workspace one byte short is a clear error.
TEST_P(MlaStep, CallerWorkspaceEqualsAllocatingPathAndAllocatesNothing) {
  Step s = make_step({5, 0, 9, 3, 1}, {21, 7, 0, 40, 0}, 16);
  const std::int64_t nq = s.metadata.cu_seqlens_q.back();
  const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
  const MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, s.cache_scale, w.view};
  OwnedTensor out = OwnedTensor::device(queue_, dtype(), {nq, heads(), v_dim()});
  OwnedTensor lse = OwnedTensor::device(queue_, DType::float32, {heads(), nq});
  // vLLM's plan with several chunks, a packed one, and no context at all.
  Step fresh = s;
  std::fill(fresh.metadata.context_lens.begin(), fresh.metadata.context_lens.end(), 0);
  const std::vector<std::pair<std::string, MlaStepPlan>> plans{
      {"vLLM's", plan(s, 24)},
      {"packed", plan_mla_prefill(params_, s.metadata, s.block_size, pack_context_chunks(s.metadata.context_lens, 30))},
      {"no context", plan(fresh, 24)}};
  for (const auto& [name, step_plan] : plans) {
    SCOPED_TRACE(name + " plan");
    run_mla_prefill(*backend_, queue_, step_plan, in, {out.view, lse.view}, {}, scale_);
    const HostTensor expected_out = fetch(out.view), expected_lse = fetch(lse.view);

    auto counter = std::make_shared<CountingAllocator>(queue_.allocator());
    Queue counted = queue_.with_allocator(counter);
    const std::size_t bytes = step_plan.workspace_bytes;
    UsmBuffer workspace = UsmBuffer::device(queue_, bytes);
    for (int step = 0; step < 2; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      queue_.memset(out.buffer.get(), 0xff, out.buffer.bytes());
      queue_.memset(lse.buffer.get(), 0xff, lse.buffer.bytes());
      queue_.memset(workspace.get(), 0xff, workspace.bytes());
      const int before = counter->allocations();
      run_mla_prefill(*backend_, counted, step_plan, in, {out.view, lse.view}, {workspace.get(), bytes}, scale_);
      counted.wait();
      EXPECT_EQ(counter->allocations(), before) << "allocations with a caller workspace";
      const HostTensor got_out = fetch(out.view), got_lse = fetch(lse.view);
      ASSERT_EQ(got_out.storage_bytes(), expected_out.storage_bytes());
      EXPECT_EQ(std::memcmp(got_out.storage(), expected_out.storage(), got_out.storage_bytes()), 0) << "out differs";
      EXPECT_EQ(std::memcmp(got_lse.storage(), expected_lse.storage(), got_lse.storage_bytes()), 0) << "lse differs";
    }
    try {
      run_mla_prefill(*backend_, queue_, step_plan, in, {out.view, lse.view}, {workspace.get(), bytes - 1}, scale_);
      ADD_FAILURE() << "a short workspace was accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(std::string(error.what())
                    .find("run_mla_prefill: the step needs " + std::to_string(bytes) +
                          " bytes of workspace (MlaStepPlan::workspace_bytes)"),
                std::string::npos)
          << error.what();
    }
  }
}

// One lifecycle for the step and single calls: the attention plan kept in
// the step's plan (planned once with the backend) is the one the backend
// makes from the step's lengths, with the same words (cu_seqlens and the
// flash backends' heaviest-first work lists) and split decisions; the step
// run from it launches the schedules of the step planned on the run, and so
// do the two halves an engine captures into a CUDA graph (upload once, then
// runs that copy nothing from the host): the same launches, the same bits.
TEST_P(MlaStep, APlanKeptInTheStepLaunchesTheSameWorkAsOnePlannedOnTheRun) {
  Step s = make_step({5, 0, 9, 3, 1}, {21, 7, 0, 40, 0}, 16);
  const std::int64_t nq = s.metadata.cu_seqlens_q.back();
  const MlaStepPlan kept = plan_mla_prefill(*backend_, queue_, s.metadata, s.block_size, 24);
  const MlaStepPlan bare = plan(s, 24);
  ASSERT_TRUE(kept.attention_plan.has_value());
  EXPECT_FALSE(bare.attention_plan.has_value());
  EXPECT_EQ(kept.workspace_bytes, bare.workspace_bytes);
  PlanOptions split;
  split.split_keys = true;
  const AttentionPlan eager = backend_->plan(queue_, kept.attention, split);
  EXPECT_EQ(kept.attention_plan->workspace_words, eager.workspace_words);
  EXPECT_EQ(kept.attention_plan->workspace_bytes, eager.workspace_bytes);
  EXPECT_EQ(kept.attention_plan->num_chunks(), static_cast<int>(kept.num_chunks()));
  EXPECT_GT(kept.num_chunks(), 1u);

  const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
  const MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, s.cache_scale, w.view};
  OwnedTensor out = OwnedTensor::device(queue_, dtype(), {nq, heads(), v_dim()});
  OwnedTensor lse = OwnedTensor::device(queue_, DType::float32, {heads(), nq});
  UsmBuffer workspace = UsmBuffer::device(queue_, kept.workspace_bytes);
  const auto run = [&](const MlaStepPlan& step_plan, std::vector<std::string>& lines) {
    queue_.memset(out.buffer.get(), 0xff, out.buffer.bytes());
    queue_.memset(workspace.get(), 0xff, workspace.bytes());
    {
      const ScopedLogCapture capture(lines);
      run_mla_prefill(*backend_, queue_, step_plan, in, {out.view, lse.view}, {workspace.get(), workspace.bytes()},
                      scale_);
      queue_.wait();
    }
    return std::make_pair(fetch(out.view), fetch(lse.view));
  };
  std::vector<std::string> kept_lines, bare_lines;
  const auto kept_result = run(kept, kept_lines);
  const auto bare_result = run(bare, bare_lines);
  const auto launches = [](const std::vector<std::string>& lines) {
    std::vector<std::string> found;
    for (const std::string& line : lines) {
      if (line.find(" work items") != std::string::npos || line.find(" blocks over") != std::string::npos) {
        found.push_back(line);
      }
    }
    return found;
  };
  EXPECT_EQ(launches(kept_lines), launches(bare_lines));
  if (!eager.workspace_words.empty()) {
    // A flash backend: one launch per phase, each from a work list.
    const std::vector<std::string> found = launches(kept_lines);
    EXPECT_EQ(found.size(), kept.num_chunks() + 1);
    for (const std::string& line : found) EXPECT_NE(line.find("heaviest first"), std::string::npos) << line;
  }
  // The two halves an engine captures: one upload, then runs that copy
  // nothing from the host, from the same work lists, to the same bits.
  queue_.memset(workspace.get(), 0xff, workspace.bytes());
  upload_mla_prefill(*backend_, queue_, kept, {workspace.get(), workspace.bytes()});
  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE("uploaded run " + std::to_string(replay));
    queue_.memset(out.buffer.get(), 0xff, out.buffer.bytes());
    std::vector<std::string> uploaded_lines;
    {
      const ScopedLogCapture capture(uploaded_lines);
      run_uploaded_mla_prefill(*backend_, queue_, kept, in, {out.view, lse.view}, {workspace.get(), workspace.bytes()},
                               scale_);
      queue_.wait();
    }
    EXPECT_EQ(launches(uploaded_lines), launches(kept_lines));
    const HostTensor replay_out = fetch(out.view);
    EXPECT_EQ(std::memcmp(replay_out.storage(), kept_result.first.storage(), replay_out.storage_bytes()), 0);
  }
  EXPECT_NE(invalid_argument_message([&] {
              upload_mla_prefill(*backend_, queue_, bare, {workspace.get(), workspace.bytes()});
            }).find("holds no attention plan"),
            std::string::npos);

  const HostTensor& got_out = kept_result.first;
  ASSERT_EQ(got_out.storage_bytes(), bare_result.first.storage_bytes());
  EXPECT_EQ(std::memcmp(got_out.storage(), bare_result.first.storage(), got_out.storage_bytes()), 0);
  EXPECT_EQ(std::memcmp(kept_result.second.storage(), bare_result.second.storage(), kept_result.second.storage_bytes()),
            0);
  EXPECT_TRUE(matches_oracle(s, kept, "plan kept in the step"));

  // A kept plan runs on its own backend only.
  MlaStepPlan mixed = kept;
  mixed.attention_plan->params.num_heads += 1;
  const std::string refusal = invalid_argument_message([&] {
    run_mla_prefill(*backend_, queue_, mixed, in, {out.view, lse.view}, {}, scale_);
  });
  EXPECT_NE(refusal.find("the plan was made by"), std::string::npos) << refusal;
}

// The FP8 attention mode (docs/contract.md §4): q as e4m3 bytes with a
// descale, the projected keys and values quantised per attention call with
// static scales or amax / 448, against the oracle that quantises the same
// way with the scales the step reports.
class MlaStepFp8 : public MlaStep {
 protected:
  // q as e4m3 bytes of q / descale (descale = amax / 448).
  static double quantise_q(Step& s) {
    float largest = 0.0f;
    for (std::int64_t t = 0; t < s.q.size(0); ++t)
      for (std::int64_t h = 0; h < s.q.size(1); ++h)
        for (std::int64_t d = 0; d < s.q.size(2); ++d) largest = std::max(largest, std::fabs(s.q.at(t, h, d)));
    const float descale = largest / 448.0f;
    HostTensor q8(DType::float8_e4m3, {s.q.size(0), s.q.size(1), s.q.size(2)});
    for (std::int64_t t = 0; t < s.q.size(0); ++t)
      for (std::int64_t h = 0; h < s.q.size(1); ++h)
        for (std::int64_t d = 0; d < s.q.size(2); ++d) q8.set(s.q.at(t, h, d) / descale, t, h, d);
    s.q = std::move(q8);
    return descale;
  }

  // The call (1 + chunk index) that reads each context token.
  static std::vector<std::vector<int>> context_phases(const MlaStepPlan& plan, const Step& s) {
    std::vector<std::vector<int>> phases;
    for (int c : s.context_lens) phases.emplace_back(static_cast<std::size_t>(c), -1);
    for (std::size_t chunk = 0; chunk < plan.num_chunks(); ++chunk) {
      const ContextChunk& run = plan.context.chunks[chunk];
      for (std::size_t b = 0; b < phases.size(); ++b)
        for (int i = 0; i < run.length(b); ++i)
          phases[b][static_cast<std::size_t>(run.starts[b] + i)] = static_cast<int>(chunk) + 1;
    }
    return phases;
  }

  // Runs the step; `scales` receives what it reports.
  ::testing::AssertionResult fp8_step_matches(Step& s, const MlaStepPlan& plan, std::optional<float> k_scale,
                                              std::optional<float> v_scale, std::vector<KvScales>& scales) {
    const double q_descale = quantise_q(s);
    const std::int64_t nq = s.metadata.cu_seqlens_q.back();
    MlaStepInputs fp8_inputs;
    fp8_inputs.q_descale = static_cast<float>(q_descale);
    fp8_inputs.k_scale = k_scale;
    fp8_inputs.v_scale = v_scale;
    scales.assign(1, KvScales{-1.0f, -1.0f});  // the step clears what it is handed
    const StepResult result = run_step(s, plan, &fp8_inputs, &scales);
    const HostTensor& out = result.out;
    const HostTensor& lse = result.lse;
    if (scales.size() != 1 + plan.num_chunks()) {
      return ::testing::AssertionFailure()
             << scales.size() << " scales reported for " << 1 + plan.num_chunks() << " attention calls";
    }
    Fp8Keys fp8{scales, context_phases(plan, s), static_cast<double>(static_cast<float>(q_descale)), {}};
    std::vector<double> want_out, want_lse;
    oracle(s, want_out, want_lse, &fp8);
    largest_ratio_ = fp8.largest_ratio;
    HostTensor expected(DType::float32, {nq, heads(), v_dim()}), expected_lse(DType::float32, {heads(), nq});
    for (std::int64_t t = 0; t < nq; ++t)
      for (int h = 0; h < heads(); ++h) {
        for (int d = 0; d < v_dim(); ++d)
          expected.set(static_cast<float>(want_out[static_cast<std::size_t>((t * heads() + h) * v_dim() + d)]), t, h,
                       d);
        expected_lse.set(static_cast<float>(want_lse[static_cast<std::size_t>(h * nq + t)]), h, t);
      }
    return results_match(out.view(), lse.view(), expected.view(), expected_lse.view(), tolerance());
  }

  std::vector<KvScales> largest_ratio_;  // the oracle's, of the last fp8_step_matches
};

TEST_P(MlaStepFp8, ScalesFromTheDataMatchTheOracle) {
  Step s = make_step({5, 0, 9, 3, 1}, {21, 7, 0, 40, 0}, 16);
  const MlaStepPlan step = plan(s, 24);  // several chunks, a sequence over two of them
  ASSERT_GE(step.num_chunks(), 3u);
  EXPECT_EQ(step.dtype, compute_dtype());
  EXPECT_EQ(step.attention_dtype, DType::float8_e4m3);
  std::vector<KvScales> scales;
  EXPECT_TRUE(fp8_step_matches(s, step, std::nullopt, std::nullopt, scales));
  // Each call's scale is amax / 448 of its own keys (values): the largest
  // one lands on 448 (within the compute dtype's rounding of the oracle's
  // projection against the backend's).
  ASSERT_EQ(largest_ratio_.size(), scales.size());
  for (std::size_t call = 0; call < scales.size(); ++call) {
    EXPECT_NEAR(largest_ratio_[call].k, 448.0, 448.0 * 1e-2) << "call " << call;
    EXPECT_NEAR(largest_ratio_[call].v, 448.0, 448.0 * 1e-2) << "call " << call;
  }
  EXPECT_NE(scales[0].k, scales[1].k) << "calls got one scale: not taken per call";
}

// Static scales small enough that the largest keys and values saturate at ±448.
TEST_P(MlaStepFp8, StaticScalesAreUsedAsGivenAndSaturate) {
  Step s = make_step({4, 6, 2}, {30, 0, 71}, 16);
  const MlaStepPlan step = plan(s, 40);
  std::vector<KvScales> scales;
  EXPECT_TRUE(fp8_step_matches(s, step, 0.004f, 0.003f, scales));
  for (const KvScales& call : scales) {
    EXPECT_EQ(call.k, 0.004f);
    EXPECT_EQ(call.v, 0.003f);
  }
  bool saturated = false;
  for (const KvScales& ratio : largest_ratio_) saturated = saturated || ratio.k > 448.0f || ratio.v > 448.0f;
  EXPECT_TRUE(saturated) << "no key or value reached the saturation the test is for";
}

TEST_P(MlaStepFp8, BadFp8ArgumentsAreClearErrors) {
  Step s = make_step({3}, {20}, 16);
  quantise_q(s);
  const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
  const DeviceTensor out = upload(queue_, HostTensor(compute_dtype(), {3, heads(), v_dim()}));
  MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, 1.0f, w.view};
  const auto message = [&](const MlaStepInputs& inputs) {
    return invalid_argument_message([&] {
      run_mla_prefill(*backend_, queue_, plan(s, 64), inputs, {out.view, {}}, {}, scale_);
    });
  };
  EXPECT_EQ(message(in), "no error");
  MlaStepInputs bad = in;
  bad.k_scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(message(bad).find("k_scale must be a finite positive number"), std::string::npos) << message(bad);
  bad = in;
  bad.v_scale = -1.0f;
  EXPECT_NE(message(bad).find("v_scale must be a finite positive number"), std::string::npos);
  bad = in;
  bad.q_descale = 0.0f;
  EXPECT_NE(message(bad).find("q descale must be a finite positive number"), std::string::npos) << message(bad);
  bad = in;
  HostTensor unquantised(compute_dtype(), {3, heads(), p() + r()});
  unquantised.fill_random(rng_, -1.0f, 1.0f);
  const DeviceTensor q_compute = upload(queue_, unquantised);
  bad.q = q_compute.view;
  EXPECT_NE(message(bad).find("q must be float8_e4m3"), std::string::npos) << message(bad);
  BackendParams without_out = params_;
  without_out.out_dtype = std::nullopt;
  const std::string planned = invalid_argument_message([&] { plan_mla_prefill(without_out, s.metadata, 16, 64); });
  EXPECT_NE(planned.find("the FP8 attention mode (dtype float8_e4m3) needs out_dtype float16 or bfloat16"),
            std::string::npos)
      << planned;
}

// The FP8 mode's arguments on a plan without it are refused.
TEST_P(MlaStep, Fp8ArgumentsNeedTheFp8Mode) {
  Step s = make_step({3}, {20}, 16);
  const DeviceTensor q = upload(queue_, s.q), kv_c = upload(queue_, s.kv_c), k_pe = upload(queue_, s.k_pe);
  const DeviceTensor cache = upload(queue_, s.cache), w = upload(queue_, s.w);
  const DeviceTensor out = upload(queue_, HostTensor(dtype(), {3, heads(), v_dim()}));
  MlaStepInputs in{q.view, kv_c.view, k_pe.view, cache.view, 1.0f, w.view};
  in.k_scale = 0.5f;
  const std::string refused = invalid_argument_message([&] {
    run_mla_prefill(*backend_, queue_, plan(s, 64), in, {out.view, {}}, {}, scale_);
  });
  EXPECT_NE(refused.find("q_descale, k_scale, v_scale and kv_scales are for the FP8 attention mode"), std::string::npos)
      << refused;
}

INSTANTIATE_TEST_SUITE_P(Fp8, MlaStepFp8,
                         ::testing::Values(ConformanceShape{DType::float8_e4m3, deepseek_dims, 2, DType::bfloat16},
                                           ConformanceShape{DType::float8_e4m3, {64, 64, 128}, 3, DType::float16}),
                         shape_name);

INSTANTIATE_TEST_SUITE_P(Shapes, MlaStep,
                         ::testing::Values(ConformanceShape{DType::float32, deepseek_dims, 2},
                                           ConformanceShape{DType::bfloat16, deepseek_dims, 2},
                                           ConformanceShape{DType::float16, {64, 64, 128}, 3}),
                         shape_name);

}  // namespace
}  // namespace mla::testing
