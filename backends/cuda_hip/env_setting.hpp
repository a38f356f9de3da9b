// The GPU backends' whole-number tuning variables (MLA_KV_SPLITS,
// MLA_HOPPER_HEAD_GROUP, MLA_CUDA_HEAD_GROUP), read one way. Plain C++.
#pragma once

#include <cstdlib>
#include <string>

#include "mla/error.hpp"

namespace mla::gpu {

// The value of environment variable `variable`: 0 when unset or empty, else
// a whole number from 1 to `max`; anything else raises
// Error(invalid_argument) naming the variable and what it holds.
inline int whole_number_setting(const char* variable, int max) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < 1 || n > max) {
    raise(ErrorCategory::invalid_argument,
          std::string(variable) + " must be a whole number from 1 to " + std::to_string(max) + "; got '" + value + "'");
  }
  return static_cast<int>(n);
}

}  // namespace mla::gpu
