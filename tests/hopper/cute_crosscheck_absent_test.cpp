// Stands in for the CuTe cross-check when the build found no CUTLASS headers
// (ci/setup-cutlass fetches them): a skip with the reason, or a failure under
// MLA_REQUIRE_EMULATOR=1 (ci/test), so CI cannot pass without the check.
#include <gtest/gtest.h>

#include "emulator_required.hpp"

TEST(CuteCrossCheck, NeedsCutlassHeaders) {
  const char* reason = "the cross-check of the emulator's sm_90 layouts against CuTe did not run: " MLA_CUTE_MISSING;
  if (mla::emulator_required()) FAIL() << reason << "; MLA_REQUIRE_EMULATOR=1 makes this a failure";
  GTEST_SKIP() << reason;
}
