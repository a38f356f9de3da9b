// The limits cuTensorMapEncodeTiled documents, checked before encoding so a
// bad spec is refused with the field's name on the GPU and under the emulator
// alike (both make_tensor_map implementations call check_tensor_map_spec),
// and so that a caller can ask first (tensor_map_spec_problem).
#pragma once

#include <cstdint>
#include <string>

#include "cuda/sm90_tensor_map.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash::sm90 {

// What makes `spec` one cuTensorMapEncodeTiled refuses, with the field's
// name; empty when it is within the limits.
inline std::string tensor_map_spec_problem(const TensorMapSpec& spec) {
  // Field names are appended, not concatenated from a literal: g++ 12 warns
  // (-Wrestrict) on `"literal" + std::string` temporaries here.
  const auto field = [](const char* name, int i) {
    std::string text = name;
    text += '[';
    text += std::to_string(i);
    text += ']';
    return text;
  };
  if (spec.base == nullptr) return "base is null";
  if (reinterpret_cast<std::uintptr_t>(spec.base) % 16 != 0) return "base is not 16-byte aligned";
  if (spec.rank < 2 || spec.rank > 5) return "rank " + std::to_string(spec.rank) + " (2..5)";
  if (spec.element_bytes != 1 && spec.element_bytes != 2 && spec.element_bytes != 4 && spec.element_bytes != 8) {
    return "element_bytes " + std::to_string(spec.element_bytes) + " (1, 2, 4 or 8)";
  }
  const unsigned span = swizzle_bytes(spec.swizzle);
  if (spec.swizzle != Swizzle::none && span == 0) return "swizzle " + std::to_string(static_cast<int>(spec.swizzle));
  for (int i = 0; i < spec.rank; ++i) {
    if (spec.dims[i] == 0 || spec.dims[i] > (std::uint64_t{1} << 32)) return field("dims", i) + " is 0 or above 2^32";
    if (spec.box[i] == 0 || spec.box[i] > 256)
      return field("box", i) + " = " + std::to_string(spec.box[i]) + " (1..256)";
  }
  const std::uint64_t row_bytes = std::uint64_t{spec.box[0]} * static_cast<unsigned>(spec.element_bytes);
  if (row_bytes % 16 != 0) return "box[0] * element_bytes = " + std::to_string(row_bytes) + " is not a multiple of 16";
  if (span != 0 && row_bytes > span) {
    return "box[0] * element_bytes = " + std::to_string(row_bytes) + " exceeds the " + std::to_string(span) +
           "-byte swizzle span";
  }
  for (int i = 0; i + 1 < spec.rank; ++i) {
    const std::uint64_t stride = spec.strides_bytes[i];
    if (stride % 16 != 0 || stride == 0 || stride >= (std::uint64_t{1} << 40)) {
      return field("strides_bytes", i) + " = " + std::to_string(stride) + " (a nonzero multiple of 16 below 2^40)";
    }
  }
  if (spec.strides_bytes[0] < spec.dims[0] * static_cast<unsigned>(spec.element_bytes)) {
    return "strides_bytes[0] is smaller than one row of dims[0] elements";
  }
  return {};
}

// Raises Error(invalid_argument) "make_tensor_map: <problem>" for a spec
// outside the limits.
inline void check_tensor_map_spec(const TensorMapSpec& spec) {
  const std::string problem = tensor_map_spec_problem(spec);
  if (problem.empty()) return;
  std::string message = "make_tensor_map: ";
  message += problem;
  raise(ErrorCategory::invalid_argument, message);
}

}  // namespace mla::cuda_flash::sm90
