// Every variant of the KOKKOS kernel (host_isa.hpp) against REFERENCE, forced
// through MLA_KOKKOS_ISA; variants this CPU cannot run are skipped with the
// reason. The conformance suite runs whichever variant the CPU selects.
#include <gtest/gtest.h>

#include <string>

#include "config/scoped_env.hpp"
#include "host_isa.hpp"
#include "kokkos/kokkos_helpers.hpp"

namespace mla::testing {
namespace {

using kokkos::HostIsa;

class KokkosIsa : public ::testing::TestWithParam<HostIsa> {
 protected:
  void SetUp() override {
    if (!kokkos::host_isa_supported(GetParam())) {
      GTEST_SKIP() << "this CPU or build cannot run the " << kokkos::host_isa_name(GetParam()) << " variant";
    }
  }
  test::ScopedEnv isa_{"MLA_KOKKOS_ISA", std::string(kokkos::host_isa_name(GetParam()))};
};

TEST_P(KokkosIsa, ForcedVariantIsTheOneSelected) { EXPECT_EQ(kokkos::selected_host_isa(), GetParam()); }

TEST_P(KokkosIsa, CausalAcrossTilesDeepSeekDims) {
  const std::vector<int> lens{333, 0, 1, 130};
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params(deepseek_dims, 3, DType::float32), lens, lens, 11));
}

TEST_P(KokkosIsa, MoreKeysThanQueriesBf16) {
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({64, 64, 128}, 2, DType::bfloat16), {200, 7}, {450, 40}, 12));
}

TEST_P(KokkosIsa, OddHeadDimsFp16) {
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({30, 7, 45}, 2, DType::float16), {97}, {97}, 13));
}

INSTANTIATE_TEST_SUITE_P(Variants, KokkosIsa, ::testing::Values(HostIsa::baseline, HostIsa::avx2, HostIsa::avx512),
                         [](const ::testing::TestParamInfo<HostIsa>& param) {
                           return std::string(kokkos::host_isa_name(param.param));
                         });

TEST(KokkosIsaSelection, WidestSupportedVariantByDefault) {
  test::ScopedEnv unset{"MLA_KOKKOS_ISA", std::nullopt};
  HostIsa widest = HostIsa::baseline;
  for (HostIsa isa : {HostIsa::avx2, HostIsa::avx512}) {
    if (kokkos::host_isa_supported(isa)) widest = isa;
  }
  EXPECT_EQ(kokkos::selected_host_isa(), widest);
  EXPECT_TRUE(kokkos::host_isa_supported(HostIsa::baseline));
}

TEST(KokkosIsaSelection, UnknownVariantIsAConfigErrorThroughTheBackend) {
  test::ScopedEnv bad{"MLA_KOKKOS_ISA", std::string("sse9")};
  try {
    (void)kokkos_matches_reference(kokkos_params({64, 64, 128}, 1, DType::float32), {5}, {5}, 14);
    FAIL() << "MLA_KOKKOS_ISA=sse9 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::config);
    const std::string message = e.what();
    EXPECT_NE(message.find("MLA_KOKKOS_ISA=sse9"), std::string::npos) << message;
    EXPECT_NE(message.find("baseline, avx2, avx512"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace mla::testing
