// KOKKOS called from several threads at once. In a build on a host-parallel
// Kokkos (OpenMP, Threads) the calls take no lock: the thread that
// initialised Kokkos fans its items out over the space's threads while the
// others run theirs on their own thread (host_parallel.hpp). Every output must
// be bitwise the one a call alone gives: an item is computed by one thread,
// whichever it is, with that thread's own scratch.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "host_parallel.hpp"
#include "kokkos/kokkos_helpers.hpp"
#include "mla/detail/queue_impl.hpp"

namespace mla::testing {
namespace {

struct Problem {
  PrefillMetadata meta;
  HostTensor q, k, v, expected_out, expected_lse;
  std::vector<std::int64_t> out_shape, lse_shape;
};

Problem make_problem(const BackendParams& params, const std::vector<int>& lens, std::uint64_t seed) {
  const PrefillMetadata meta = PrefillMetadata::from_lengths(lens, lens);
  const std::int64_t n = meta.num_q_tokens(), heads = params.num_heads;
  const std::int64_t dqk = params.dims.qk_head_dim(), dv = params.dims.v_head_dim;
  Problem p{meta,
            HostTensor(params.dtype, {n, heads, dqk}),
            HostTensor(params.dtype, {n, heads, dqk}),
            HostTensor(params.dtype, {n, heads, dv}),
            HostTensor(params.dtype, {n, heads, dv}),
            HostTensor(DType::float32, {heads, n}),
            {n, heads, dv},
            {heads, n}};
  std::mt19937_64 rng(seed);
  p.q.fill_random(rng, -2.0f, 2.0f);
  p.k.fill_random(rng, -2.0f, 2.0f);
  p.v.fill_random(rng, -1.0f, 1.0f);
  return p;
}

// One call into poisoned outputs; returns whether it matched the expected bits.
bool run_once(PrefillBackend& backend, Problem& p, float scale, bool record) {
  Queue queue = Queue::host();
  HostTensor out(p.expected_out.dtype(), p.out_shape);  // starts poisoned
  HostTensor lse(DType::float32, p.lse_shape);
  backend.prepare(queue, p.meta);
  backend.run_new_tokens(queue, p.q.view(), p.k.view(), p.v.view(), scale, true, out.view(), std::nullopt, lse.view());
  if (record) {
    std::memcpy(p.expected_out.storage(), out.storage(), out.storage_bytes());
    std::memcpy(p.expected_lse.storage(), lse.storage(), lse.storage_bytes());
    return true;
  }
  return std::memcmp(p.expected_out.storage(), out.storage(), out.storage_bytes()) == 0 &&
         std::memcmp(p.expected_lse.storage(), lse.storage(), lse.storage_bytes()) == 0;
}

// Runs `rounds` calls of `matches(t)` on each of `threads` threads started
// together, thread 0 being this one (it initialised Kokkos, so its calls run
// in parallel with the others'); returns how many calls returned false.
template <class Matches>
int mismatches_when_concurrent(int threads, int rounds, Matches matches) {
  std::atomic<bool> go{false};
  std::atomic<int> mismatches{0};
  auto work = [&](int t) {
    while (!go.load()) std::this_thread::yield();
    for (int r = 0; r < rounds; ++r) {
      if (!matches(t)) mismatches.fetch_add(1);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  go.store(true);
  work(0);
  for (std::thread& thread : pool) thread.join();
  return mismatches.load();
}

TEST(KokkosConcurrency, ConcurrentCallsGiveTheBitsOfACallAlone) {
  const MlaDims dims = deepseek_dims;
  const BackendParams params = kokkos_params(dims, 5, DType::bfloat16);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dims.qk_head_dim()));
  constexpr int threads = 4;
  constexpr int rounds = 3;
  std::vector<Problem> problems;
  std::vector<std::unique_ptr<PrefillBackend>> backends;
  for (int t = 0; t < threads; ++t) {
    // Odd lengths, an empty sequence, a different batch per thread.
    problems.push_back(make_problem(params, {131 + 40 * t, 0, 67, 200 - 30 * t}, 1000 + t));
    backends.push_back(detail::kokkos_backend_entry().factory(params));
    run_once(*backends.back(), problems.back(), scale, true);
  }
  // The recorded bits must be a real result, not an untouched poison.
  for (const Problem& p : problems) {
    ASSERT_FALSE(std::isnan(p.expected_out.at(0, 0, 0)));
    ASSERT_FALSE(std::isnan(p.expected_out.at(p.out_shape[0] - 1, p.out_shape[1] - 1, p.out_shape[2] - 1)));
  }

  EXPECT_EQ(mismatches_when_concurrent(threads, rounds,
                                       [&](int t) { return run_once(*backends[t], problems[t], scale, false); }),
            0);
}

// The MLA step's up-projection from several threads at once, fp32 and bf16
// calls of different sizes side by side (on oneDNN where the build has it:
// each thread its own buffers and oneDNN streams, the GEMM shapes created
// concurrently): every key and value bitwise the one a call alone gives.
TEST(KokkosConcurrency, ConcurrentProjectionsGiveTheBitsOfAProjectionAlone) {
  constexpr int threads = 4, rounds = 3, heads = 3, latent = 96;
  const MlaDims dims{64, 16, 32};
  struct Projection {
    std::unique_ptr<PrefillBackend> backend;
    HostTensor x, w, expected_k, expected_v;
  };
  std::vector<Projection> projections;
  const auto project = [&](Projection& p, HostTensor& k, HostTensor& v) {
    Queue queue = Queue::host();
    p.backend->project_latents(queue, p.x.view(), p.w.view(), k.view(), v.view());
  };
  for (int t = 0; t < threads; ++t) {
    const DType dtype = t % 2 == 0 ? DType::float32 : DType::bfloat16;
    const std::int64_t tokens = 300 + 97 * t;
    std::mt19937_64 rng(2000 + t);
    Projection p{detail::kokkos_backend_entry().factory(kokkos_params(dims, heads, dtype)),
                 HostTensor(DType::float32, {tokens, latent}),
                 HostTensor(dtype, {heads * (dims.qk_nope_head_dim + dims.v_head_dim), latent}),
                 HostTensor(dtype, {tokens, heads, dims.qk_head_dim()}),
                 HostTensor(dtype, {tokens, heads, dims.v_head_dim})};
    p.x.fill_random(rng, -1.0f, 1.0f);
    p.w.fill_random(rng, -0.5f, 0.5f);
    project(p, p.expected_k, p.expected_v);
    ASSERT_FALSE(std::isnan(p.expected_v.at(tokens - 1, heads - 1, dims.v_head_dim - 1)));
    projections.push_back(std::move(p));
  }
  const auto matches = [&](int t) {
    Projection& p = projections[static_cast<std::size_t>(t)];
    HostTensor k(p.expected_k.dtype(), {p.x.size(0), heads, dims.qk_head_dim()});
    HostTensor v(p.expected_v.dtype(), {p.x.size(0), heads, dims.v_head_dim});
    project(p, k, v);
    return std::memcmp(k.storage(), p.expected_k.storage(), k.storage_bytes()) == 0 &&
           std::memcmp(v.storage(), p.expected_v.storage(), v.storage_bytes()) == 0;
  };
  EXPECT_EQ(mismatches_when_concurrent(threads, rounds, matches), 0);
}

TEST(KokkosConcurrency, SpaceIsAsBuilt) {
  // A build that requires a host-parallel Kokkos (MLA_KOKKOS_HOST_PARALLEL)
  // must have compiled the kernels for one.
#if MLA_EXPECT_HOST_PARALLEL
  EXPECT_TRUE(mla::kokkos::host_parallel_space);
#else
  GTEST_SKIP() << "this build does not require a host-parallel Kokkos (host-parallel: "
               << mla::kokkos::host_parallel_space << ")";
#endif
}

}  // namespace
}  // namespace mla::testing
