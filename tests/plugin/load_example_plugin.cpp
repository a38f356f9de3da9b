// Linked into conformance_custom: loads the example plugin before any test,
// so the conformance suite finds member CUSTOM registered, as a program that
// named the plugin in its configuration would.
#include <gtest/gtest.h>

#include "mla/registration.hpp"

namespace {

class ExamplePluginEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { mla::load_plugin(MLA_EXAMPLE_PLUGIN); }
};

// gtest owns and deletes registered environments.
const ::testing::Environment* const environment = ::testing::AddGlobalTestEnvironment(new ExamplePluginEnvironment);

}  // namespace
