// A build without Kokkos still lists KOKKOS: unavailable, with the reason,
// and its factory refuses to build a backend.
#include <gtest/gtest.h>

#include "builtin_entries.hpp"
#include "mla/error.hpp"

namespace mla::testing {
namespace {

TEST(KokkosWithoutKokkos, EntryIsUnavailableAndFactoryRefuses) {
  const BackendEntry entry = detail::kokkos_backend_entry();
  EXPECT_EQ(entry.description.name, "KOKKOS");
  ASSERT_TRUE(entry.description.availability);
  const Availability availability = entry.description.availability();
  EXPECT_FALSE(availability.available);
  EXPECT_EQ(availability.reason, "built without Kokkos");
  try {
    entry.factory(BackendParams{});
    FAIL() << "the factory built a KOKKOS backend without Kokkos";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::not_supported);
  }
}

}  // namespace
}  // namespace mla::testing
