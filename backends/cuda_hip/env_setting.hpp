// The GPU backends' whole-number tuning variables (MLA_KV_SPLITS,
// MLA_HOPPER_HEAD_GROUP, MLA_CUDA_HEAD_GROUP, MLA_CUBLASLT_PASS_TOKENS,
// MLA_CUBLASLT_WORKSPACE_MIB), read one way. Plain C++.
#pragma once

#include <cstdlib>
#include <string>

#include "mla/error.hpp"

namespace mla::gpu {

// The value of environment variable `variable`: `unset` when unset or
// empty, else a whole number from `min` to `max`; anything else raises
// Error(invalid_argument) naming the variable and what it holds.
inline int whole_number_setting(const char* variable, int min, int max, int unset) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return unset;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < min || n > max) {
    raise(ErrorCategory::invalid_argument, std::string(variable) + " must be a whole number from " +
                                               std::to_string(min) + " to " + std::to_string(max) + "; got '" + value +
                                               "'");
  }
  return static_cast<int>(n);
}

// The value of environment variable `variable`: 0 when unset or empty, else
// a whole number from 1 to `max` (as above).
inline int whole_number_setting(const char* variable, int max) { return whole_number_setting(variable, 1, max, 0); }

}  // namespace mla::gpu
