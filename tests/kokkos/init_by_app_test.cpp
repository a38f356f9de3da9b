// An application that initialises and finalises Kokkos itself: the library
// must use that Kokkos and leave its lifetime alone. This executable holds
// only these tests, so process-wide Kokkos state is its own.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include "kokkos/kokkos_helpers.hpp"
#include "kokkos_runtime.hpp"

namespace mla::testing {
namespace {

// The application's own Kokkos, started before any test and finalised after
// the last one. A library that finalised it again at exit would trip Kokkos'
// own checks and fail the run.
class ApplicationKokkos : public ::testing::Environment {
 public:
  void SetUp() override { Kokkos::initialize(); }
  void TearDown() override { Kokkos::finalize(); }
};

const auto* const application_kokkos = ::testing::AddGlobalTestEnvironment(new ApplicationKokkos);

TEST(KokkosInitByApp, LibraryUsesTheApplicationsKokkos) {
  ASSERT_NE(application_kokkos, nullptr);
  ASSERT_TRUE(Kokkos::is_initialized());
  EXPECT_TRUE(
      kokkos_matches_reference(kokkos_params({128, 64, 128}, 3, DType::float16), {100, 0, 31}, {100, 0, 31}, 21));
  EXPECT_TRUE(Kokkos::is_initialized());
  EXPECT_FALSE(kokkos::initialized_by_library());
}

TEST(KokkosInitByApp, ApplicationViewsSurviveLibraryCalls) {
  // The application's data in Kokkos views stays valid around library calls.
  Kokkos::View<float*, Kokkos::HostSpace> data("application data", 64);
  Kokkos::deep_copy(data, 2.5f);
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({64, 64, 128}, 2, DType::float32), {17}, {40}, 22));
  EXPECT_EQ(data(63), 2.5f);
  EXPECT_FALSE(kokkos::initialized_by_library());
}

}  // namespace
}  // namespace mla::testing
