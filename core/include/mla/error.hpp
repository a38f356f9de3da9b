// The library's one error type. Every failure the library reports, from a bad
// YAML key to a failed CUDA launch, arrives as mla::Error with a category, so a
// caller can branch on the category and show the message as it is.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace mla {

enum class ErrorCategory {
  invalid_argument,  // shapes, dtypes, strides or values the caller passed are wrong
  config,            // YAML or environment configuration is wrong
  not_found,         // a name (backend, file, symbol) does not exist
  not_supported,     // valid request this build or device cannot serve
  selection,         // the selector refused a backend or found none
  device,            // a vendor runtime call failed
  io,                // reading or writing a file failed
  plugin,            // loading or registering a plugin failed
  internal,          // a bug in the library
};

// Name of a category as printed in messages, e.g. "invalid argument".
std::string_view category_name(ErrorCategory category);

class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message);
  ErrorCategory category() const noexcept { return category_; }

 private:
  ErrorCategory category_;
};

// Throws Error(category, message). A function rather than a macro so call sites
// stay expressions and static analysers see [[noreturn]].
[[noreturn]] void raise(ErrorCategory category, const std::string& message);

}  // namespace mla
