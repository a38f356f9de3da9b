// KOKKOS' two paths for bf16 inputs on an AVX-512 CPU, each forced through
// MLA_KOKKOS_ISA: avx512_bf16 (both products as AVX512-BF16 dot products,
// P rounded to bf16) and avx512 (bf16 widened to fp32, fp32 FMAs). A path
// this CPU cannot run is skipped with the reason; the conformance suite runs
// the default one (avx512_bf16 where the CPU has it).
//
// Against REFERENCE the bounds are far below the contract's bf16 tolerance (1e-2):
// both paths multiply exactly (bf16 products fit in fp32) and sum in fp32,
// so what separates them from REFERENCE is the rounding of the output to
// bf16 and, on the dot-product path, of P. A kernel that drops or misplaces
// one half of a pair (odd head dims, an odd last key), reads a padded row,
// or mis-scales the scores is far outside it. The shapes put odd key counts
// at the end of key tiles, leave rows without keys, and end query tiles
// short of a register block.
#include <gtest/gtest.h>

#include <string>

#include "config/scoped_env.hpp"
#include "host_isa.hpp"
#include "kokkos/kokkos_helpers.hpp"

namespace mla::testing {
namespace {

using kokkos::HostIsa;

class KokkosBf16Path : public ::testing::TestWithParam<std::string> {
 protected:
  // The dot-product path: P's rounding leaves about 2e-3 on these shapes.
  // The FMA path rounds only the output, like REFERENCE: about 6e-5.
  Tolerance tight() const { return GetParam() == "avx512_bf16" ? Tolerance{3e-3, 1e-5} : Tolerance{2e-4, 1e-5}; }
  void SetUp() override {
    const bool supported =
        GetParam() == "avx512_bf16" ? kokkos::host_bf16_dot_supported() : kokkos::host_isa_supported(HostIsa::avx512);
    if (!supported) GTEST_SKIP() << "this CPU or build cannot run the " << GetParam() << " path";
  }
  test::ScopedEnv isa_{"MLA_KOKKOS_ISA", GetParam()};
};

TEST_P(KokkosBf16Path, ForcedPathIsTheOneSelected) {
  EXPECT_EQ(kokkos::selected_host_isa(), HostIsa::avx512);
  EXPECT_EQ(kokkos::selected_bf16_dot(), GetParam() == "avx512_bf16");
}

TEST_P(KokkosBf16Path, CausalAcrossTilesDeepSeekDims) {
  const std::vector<int> lens{333, 0, 1, 130, 97};
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params(deepseek_dims, 3, DType::bfloat16), lens, lens, 21, tight()));
}

TEST_P(KokkosBf16Path, OddHeadDimsAndKeyCounts) {
  // dqk 37 and dv 45: an odd last pair in both products' depth and width.
  const std::vector<int> lens{97, 63, 1, 129};
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({30, 7, 45}, 2, DType::bfloat16), lens, lens, 22, tight()));
}

TEST_P(KokkosBf16Path, MoreKeysThanQueries) {
  EXPECT_TRUE(
      kokkos_matches_reference(kokkos_params({64, 64, 128}, 2, DType::bfloat16), {200, 7}, {451, 41}, 23, tight()));
}

TEST_P(KokkosBf16Path, FewerKeysThanQueriesLeavesRowsWithoutKeys) {
  // Bottom-right: the first 65 queries of each sequence see no key (output
  // 0, LSE -inf).
  EXPECT_TRUE(
      kokkos_matches_reference(kokkos_params(deepseek_dims, 2, DType::bfloat16), {130, 9}, {65, 3}, 24, tight()));
}

TEST_P(KokkosBf16Path, NotCausal) {
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({128, 64, 128}, 3, DType::bfloat16), {75, 1}, {129, 66}, 25,
                                       tight(), /*causal=*/false));
}

TEST_P(KokkosBf16Path, WideValueHeadGlm5Dims) {
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({192, 64, 256}, 2, DType::bfloat16), {257}, {257}, 26, tight()));
}

INSTANTIATE_TEST_SUITE_P(Paths, KokkosBf16Path, ::testing::Values("avx512_bf16", "avx512"),
                         [](const ::testing::TestParamInfo<std::string>& param) { return param.param; });

TEST(KokkosBf16Selection, DotProductsByDefaultWhereSupported) {
  test::ScopedEnv unset{"MLA_KOKKOS_ISA", std::nullopt};
  EXPECT_EQ(kokkos::selected_bf16_dot(), kokkos::host_bf16_dot_supported());
  for (HostIsa isa : {HostIsa::baseline, HostIsa::avx2, HostIsa::avx512}) {
    if (!kokkos::host_isa_supported(isa)) continue;
    // Naming a variant runs bf16 through its fp32 FMAs.
    test::ScopedEnv forced{"MLA_KOKKOS_ISA", std::string(kokkos::host_isa_name(isa))};
    EXPECT_FALSE(kokkos::selected_bf16_dot()) << kokkos::host_isa_name(isa);
  }
}

TEST(KokkosBf16Selection, UnsupportedDotPathIsAConfigError) {
  if (kokkos::host_bf16_dot_supported()) GTEST_SKIP() << "this CPU runs the avx512_bf16 path";
  test::ScopedEnv forced{"MLA_KOKKOS_ISA", std::string("avx512_bf16")};
  try {
    (void)kokkos::selected_bf16_dot();
    FAIL() << "MLA_KOKKOS_ISA=avx512_bf16 was accepted on a CPU without AVX512-BF16";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::config);
  }
}

}  // namespace
}  // namespace mla::testing
