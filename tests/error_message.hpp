// What a test asks of a call that should be refused: the message of the
// Error(invalid_argument) it raises, or "no error". Another category fails the
// calling test.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "mla/error.hpp"

template <class Call>
std::string invalid_argument_message(Call&& call) {
  try {
    call();
  } catch (const mla::Error& error) {
    EXPECT_EQ(error.category(), mla::ErrorCategory::invalid_argument);
    return std::string(error.what());
  }
  return std::string("no error");
}
