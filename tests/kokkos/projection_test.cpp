// KOKKOS' up-projection on each of its GEMMs (MLA_KOKKOS_PROJECTION: own, and
// oneDNN where the build has it) over more tokens than one GEMM block, so that
// full blocks and the padded last one both run: within the step's bound of an
// fp64 sum, nothing written outside k's and v's views, and batch invariant:
// every token's keys and values are the same bits when it is projected alone
// or in another slice of the batch, and when the call runs on another thread
// (which runs its items inline in a host-parallel build).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config/scoped_env.hpp"
#include "flash_attention.hpp"
#include "kokkos/kokkos_helpers.hpp"
#include "mla/error.hpp"

namespace mla::testing {
namespace {

// Heads, P, R, V and the latent width L of a projection.
struct Shape {
  int heads, p, r, v, latent;
};
constexpr Shape kOdd{3, 40, 8, 24, 72};
constexpr Shape kDeepSeek{1, 128, 64, 128, 512};

struct Projection {
  HostTensor k, v;
};

// k [T, H, P+R] with its rope part poisoned; v [T, H, V] with padded rows.
Projection project(PrefillBackend& backend, const Shape& s, const HostTensor& x, std::int64_t first,
                   std::int64_t tokens, const HostTensor& w, DType dtype) {
  Queue queue = Queue::host();
  Projection out{HostTensor(dtype, {tokens, s.heads, s.p + s.r}),
                 HostTensor(dtype, {tokens, s.heads, s.v}, {s.heads * s.v + 5, s.v, 1}, 3, 7)};
  TensorView rows = x.view();
  rows.data = static_cast<std::byte*>(rows.data) + first * rows.stride[0] * static_cast<std::int64_t>(sizeof(float));
  rows.shape[0] = tokens;
  backend.project_latents(queue, rows, w.view(), out.k.view(), out.v.view());
  return out;
}

float projected(const Shape& s, const Projection& p, std::int64_t t, int h, int j) {
  return j < s.p ? p.k.at(t, h, j) : p.v.at(t, h, j - s.p);
}

struct Case {
  std::string gemm;
  DType dtype;
  DType weights;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.gemm << ", " << dtype_name(c.dtype) << " keys, " << dtype_name(c.weights) << " kv_b_proj";
}

class KokkosProjection : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().gemm == "onednn" && !kokkos::onednn_projection_built()) {
      // ci/test sets MLA_REQUIRE_ONEDNN=1: its machines have libdnnl-dev (ci/setup).
      const char* required = std::getenv("MLA_REQUIRE_ONEDNN");
      if (required != nullptr && std::string(required) == "1") FAIL() << "built without oneDNN (MLA_REQUIRE_ONEDNN=1)";
      GTEST_SKIP() << "built without oneDNN";
    }
  }
  test::ScopedEnv gemm_{"MLA_KOKKOS_PROJECTION", GetParam().gemm};
};

void check_projection(const Case& c, const Shape& s, std::int64_t tokens,
                      const std::vector<std::pair<std::int64_t, std::int64_t>>& slices) {
  const auto& [gemm, dtype, weight_dtype] = c;
  std::mt19937_64 rng(31);
  HostTensor x(DType::float32, {tokens, s.latent}, {s.latent + 3, 1});  // padded rows
  x.fill_random(rng, -1.0f, 1.0f);
  HostTensor w(weight_dtype, {s.heads * (s.p + s.v), s.latent});
  w.fill_random(rng, -0.5f, 0.5f);
  auto backend = detail::kokkos_backend_entry().factory(kokkos_params({s.p, s.r, s.v}, s.heads, dtype));

  const Projection all = project(*backend, s, x, 0, tokens, w, dtype);
  EXPECT_TRUE(all.v.padding_untouched()) << "v written outside its view";
  double err = 0, norm = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < s.heads; ++h) {
      for (int j = 0; j < s.p + s.v; ++j) {
        double want = 0;
        for (int l = 0; l < s.latent; ++l) want += double{x.at(t, l)} * w.at(h * (s.p + s.v) + j, l);
        const double got = projected(s, all, t, h, j);
        err += (got - want) * (got - want);
        norm += want * want;
      }
      for (int j = 0; j < s.r; ++j) ASSERT_TRUE(std::isnan(all.k.at(t, h, s.p + j))) << "rope column " << j;
    }
  }
  EXPECT_LE(std::sqrt(err / norm), tolerance_for(dtype).out_relative);

  for (const auto& [first, count] : slices) {
    const Projection part = project(*backend, s, x, first, count, w, dtype);
    for (std::int64_t t = 0; t < count; ++t) {
      for (int h = 0; h < s.heads; ++h) {
        for (int j = 0; j < s.p + s.v; ++j) {
          ASSERT_EQ(projected(s, part, t, h, j), projected(s, all, first + t, h, j))
              << "token " << first + t << " in the slice from " << first << " of " << count << ", head " << h
              << ", column " << j;
        }
      }
    }
  }
  Projection elsewhere;
  std::thread([&] { elsewhere = project(*backend, s, x, 0, tokens, w, dtype); }).join();
  EXPECT_EQ(std::memcmp(elsewhere.k.storage(), all.k.storage(), all.k.storage_bytes()), 0);
  EXPECT_EQ(std::memcmp(elsewhere.v.storage(), all.v.storage(), all.v.storage_bytes()), 0);
}

// Two full blocks of the oneDNN path (256 tokens each) and a partial third;
// slices that put tokens of full blocks into the last block and the other way
// round, and tokens alone.
TEST_P(KokkosProjection, MatchesFp64AndIsBatchAndThreadInvariant) {
  check_projection(GetParam(), kOdd, 2 * 256 + 37, {{0, 1}, {300, 1}, {3, 5}, {250, 299}, {511, 38}});
}

// The same at DeepSeek's L and head dims, where the GEMM library may choose
// other kernels than at the odd shape.
TEST_P(KokkosProjection, DeepSeekDimsMatchFp64AndAreBatchInvariant) {
  check_projection(GetParam(), kDeepSeek, 256 + 21, {{0, 1}, {260, 1}, {7, 256}});
}

INSTANTIATE_TEST_SUITE_P(
    Gemms, KokkosProjection,
    ::testing::Values(Case{"own", DType::float32, DType::float32}, Case{"own", DType::bfloat16, DType::bfloat16},
                      Case{"own", DType::float16, DType::float32}, Case{"onednn", DType::float32, DType::float32},
                      Case{"onednn", DType::float32, DType::bfloat16}, Case{"onednn", DType::bfloat16, DType::bfloat16},
                      Case{"onednn", DType::bfloat16, DType::float32}),
    [](const ::testing::TestParamInfo<Case>& param) {
      return param.param.gemm + "_" + std::string(dtype_name(param.param.dtype)) + "_weights_" +
             std::string(dtype_name(param.param.weights));
    });

// The category of the error a small projection raises, if any.
std::optional<ErrorCategory> projection_error(DType dtype) {
  std::mt19937_64 rng(5);
  const Shape& s = kOdd;
  HostTensor x(DType::float32, {4, s.latent}), w(dtype, {s.heads * (s.p + s.v), s.latent});
  x.fill_random(rng, -1.0f, 1.0f);
  w.fill_random(rng, -0.5f, 0.5f);
  auto backend = detail::kokkos_backend_entry().factory(kokkos_params({s.p, s.r, s.v}, s.heads, dtype));
  try {
    project(*backend, s, x, 0, 4, w, dtype);
  } catch (const Error& error) {
    return error.category();
  }
  return std::nullopt;
}

TEST(KokkosProjectionChoice, UnknownGemmIsAConfigError) {
  test::ScopedEnv bad{"MLA_KOKKOS_PROJECTION", std::string("mkl")};
  EXPECT_EQ(projection_error(DType::float32), ErrorCategory::config);
}

// onednn insists: a call it cannot serve (fp16 keys) or a build without it fails
// instead of falling back; automatic falls back to the own GEMM.
TEST(KokkosProjectionChoice, OneDnnInsistsAutomaticFallsBack) {
  {
    test::ScopedEnv insist{"MLA_KOKKOS_PROJECTION", std::string("onednn")};
    EXPECT_EQ(projection_error(DType::float16), ErrorCategory::not_supported);
    EXPECT_EQ(projection_error(DType::float32),
              kokkos::onednn_projection_built() ? std::nullopt : std::optional(ErrorCategory::not_supported));
  }
  test::ScopedEnv automatic{"MLA_KOKKOS_PROJECTION", std::nullopt};
  EXPECT_EQ(projection_error(DType::float16), std::nullopt);
}

}  // namespace
}  // namespace mla::testing
