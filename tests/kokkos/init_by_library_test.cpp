// An application that never touches Kokkos: the library initialises Kokkos on
// first use and finalises it at exit. This executable holds only this test,
// so process-wide Kokkos state is its own.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstdlib>

#include "kokkos/kokkos_helpers.hpp"
#include "kokkos_runtime.hpp"

namespace mla::testing {
namespace {

// Registered during static initialisation, before the library registers its
// own handler, so it runs after that one: Kokkos must be finalised by then.
// _Exit makes a forgotten finalize fail the test run.
const bool exit_check_registered = [] {
  std::atexit([] {
    if (Kokkos::is_initialized()) {
      std::fputs("Kokkos is still initialized at exit: the library did not finalize it\n", stderr);
      std::_Exit(3);
    }
  });
  return true;
}();

TEST(KokkosInitByLibrary, FirstUseInitialisesAndTheLibraryOwnsKokkos) {
  ASSERT_TRUE(exit_check_registered);
  ASSERT_FALSE(Kokkos::is_initialized()) << "nothing in this process should have started Kokkos yet";
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({64, 64, 128}, 2, DType::float32), {70, 3}, {70, 3}, 11));
  EXPECT_TRUE(Kokkos::is_initialized());
  EXPECT_TRUE(kokkos::initialized_by_library());
  // A second backend reuses the running Kokkos.
  EXPECT_TRUE(kokkos_matches_reference(kokkos_params({64, 64, 128}, 1, DType::bfloat16), {9}, {9}, 12));
  EXPECT_TRUE(kokkos::initialized_by_library());
}

}  // namespace
}  // namespace mla::testing
