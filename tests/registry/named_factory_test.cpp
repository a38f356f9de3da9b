// Named factories: what YAML overrides ("KOKKOS: MY_FLASH") refer to.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "mla/backend/registry.hpp"
#include "mla/error.hpp"
#include "registry/fake_backend.hpp"

namespace mla {
namespace {

// Removes the factories a test registered, pass or fail.
struct FactoryCleanup {
  std::vector<std::string> names;
  ~FactoryCleanup() {
    for (const std::string& name : names) remove_named_factory(name);
  }
};

TEST(NamedFactories, BuiltinNamesAreAlwaysPresent) {
  const std::vector<std::string> names = named_factory_names();
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 5),
            (std::vector<std::string>{"REFERENCE", "KOKKOS", "CUDA_FLASH", "HIP_FLASH", "HOPPER_FLASH"}));
  EXPECT_EQ(std::count(names.begin(), names.end(), "CUSTOM"), 0);
  for (const char* name : {"REFERENCE", "KOKKOS", "CUDA_FLASH", "HIP_FLASH", "HOPPER_FLASH"}) {
    const auto entry = find_named_factory(name);
    ASSERT_TRUE(entry.has_value()) << name;
    EXPECT_EQ(entry->description.name, name);
  }
  EXPECT_FALSE(find_named_factory("CUSTOM").has_value());
  EXPECT_FALSE(find_named_factory("NOT_A_FACTORY").has_value());
}

TEST(NamedFactories, BuiltinNamesCannotBeRedefinedOrRemoved) {
  try {
    register_named_factory("REFERENCE", test::make_fake_entry("FAKE"), RegisterMode::replace);
    ADD_FAILURE() << "REFERENCE was redefined";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::plugin);
  }
  EXPECT_EQ(find_named_factory("REFERENCE")->description.name, "REFERENCE");
  EXPECT_THROW(remove_named_factory("KOKKOS"), Error);
  EXPECT_TRUE(find_named_factory("KOKKOS").has_value());
}

TEST(NamedFactories, RegisterFindReplaceRemove) {
  FactoryCleanup cleanup{{"MY_FLASH"}};
  register_named_factory("MY_FLASH", test::make_fake_entry("MY_FLASH_V1"));
  ASSERT_TRUE(find_named_factory("MY_FLASH").has_value());
  EXPECT_EQ(find_named_factory("MY_FLASH")->description.name, "MY_FLASH_V1");
  const auto names = named_factory_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "MY_FLASH"), 1);

  try {
    register_named_factory("MY_FLASH", test::make_fake_entry("MY_FLASH_V2"), RegisterMode::add);
    ADD_FAILURE() << "a second add of MY_FLASH was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::plugin);
    EXPECT_NE(std::string(error.what()).find("MY_FLASH"), std::string::npos);
  }
  EXPECT_EQ(find_named_factory("MY_FLASH")->description.name, "MY_FLASH_V1");

  register_named_factory("MY_FLASH", test::make_fake_entry("MY_FLASH_V2"), RegisterMode::replace);
  EXPECT_EQ(find_named_factory("MY_FLASH")->description.name, "MY_FLASH_V2");

  remove_named_factory("MY_FLASH");
  EXPECT_FALSE(find_named_factory("MY_FLASH").has_value());
  EXPECT_NO_THROW(remove_named_factory("MY_FLASH"));  // removing what is gone is harmless
}

TEST(NamedFactories, BadRegistrations) {
  EXPECT_THROW(register_named_factory("", test::make_fake_entry("FAKE")), Error);
  BackendEntry no_factory = test::make_fake_entry("FAKE");
  no_factory.factory = nullptr;
  EXPECT_THROW(register_named_factory("NO_FACTORY", no_factory), Error);
  EXPECT_FALSE(find_named_factory("NO_FACTORY").has_value());
}

}  // namespace
}  // namespace mla
