// The limits cuTensorMapEncodeTiled documents, checked before encoding so a
// bad spec is refused with the field's name on the GPU and under the emulator
// alike (both make_tensor_map implementations call this).
#pragma once

#include <cstdint>
#include <string>

#include "cuda/sm90_tensor_map.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash::sm90 {

inline void check_tensor_map_spec(const TensorMapSpec& spec) {
  const auto refuse = [](const std::string& what) {
    std::string message = "make_tensor_map: ";
    message += what;
    raise(ErrorCategory::invalid_argument, message);
  };
  // Field names are appended, not concatenated from a literal: g++ 12 warns
  // (-Wrestrict) on `"literal" + std::string` temporaries here.
  const auto field = [](const char* name, int i) {
    std::string text = name;
    text += '[';
    text += std::to_string(i);
    text += ']';
    return text;
  };
  if (spec.base == nullptr) refuse("base is null");
  if (reinterpret_cast<std::uintptr_t>(spec.base) % 16 != 0) refuse("base is not 16-byte aligned");
  if (spec.rank < 2 || spec.rank > 5) refuse("rank " + std::to_string(spec.rank) + " (2..5)");
  if (spec.element_bytes != 1 && spec.element_bytes != 2 && spec.element_bytes != 4 && spec.element_bytes != 8) {
    refuse("element_bytes " + std::to_string(spec.element_bytes) + " (1, 2, 4 or 8)");
  }
  const unsigned span = swizzle_bytes(spec.swizzle);
  if (spec.swizzle != Swizzle::none && span == 0) refuse("swizzle " + std::to_string(static_cast<int>(spec.swizzle)));
  for (int i = 0; i < spec.rank; ++i) {
    if (spec.dims[i] == 0 || spec.dims[i] > (std::uint64_t{1} << 32)) refuse(field("dims", i) + " is 0 or above 2^32");
    if (spec.box[i] == 0 || spec.box[i] > 256) {
      refuse(field("box", i) + " = " + std::to_string(spec.box[i]) + " (1..256)");
    }
  }
  const std::uint64_t row_bytes = std::uint64_t{spec.box[0]} * static_cast<unsigned>(spec.element_bytes);
  if (row_bytes % 16 != 0) refuse("box[0] * element_bytes = " + std::to_string(row_bytes) + " is not a multiple of 16");
  if (span != 0 && row_bytes > span) {
    refuse("box[0] * element_bytes = " + std::to_string(row_bytes) + " exceeds the " + std::to_string(span) +
           "-byte swizzle span");
  }
  for (int i = 0; i + 1 < spec.rank; ++i) {
    const std::string dim = field("strides_bytes", i);
    const std::uint64_t stride = spec.strides_bytes[i];
    if (stride % 16 != 0 || stride == 0 || stride >= (std::uint64_t{1} << 40)) {
      refuse(dim + " = " + std::to_string(stride) + " (a nonzero multiple of 16 below 2^40)");
    }
  }
  if (spec.strides_bytes[0] < spec.dims[0] * static_cast<unsigned>(spec.element_bytes)) {
    refuse("strides_bytes[0] is smaller than one row of dims[0] elements");
  }
}

}  // namespace mla::cuda_flash::sm90
