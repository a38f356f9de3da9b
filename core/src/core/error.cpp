#include "mla/error.hpp"

namespace mla {

std::string_view category_name(ErrorCategory category) {
  switch (category) {
    case ErrorCategory::invalid_argument:
      return "invalid argument";
    case ErrorCategory::config:
      return "configuration error";
    case ErrorCategory::not_found:
      return "not found";
    case ErrorCategory::not_supported:
      return "not supported";
    case ErrorCategory::selection:
      return "backend selection";
    case ErrorCategory::device:
      return "device error";
    case ErrorCategory::io:
      return "I/O error";
    case ErrorCategory::plugin:
      return "plugin error";
    case ErrorCategory::internal:
      return "internal error";
  }
  return "error";
}

Error::Error(ErrorCategory category, const std::string& message) : std::runtime_error(message), category_(category) {}

void raise(ErrorCategory category, const std::string& message) { throw Error(category, message); }

}  // namespace mla
