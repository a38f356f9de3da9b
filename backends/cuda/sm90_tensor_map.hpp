// Host side of the sm_90 tensor memory accelerator (TMA): the description of a
// global tensor and the box one cp.async.bulk.tensor moves, encoded into the
// 128-byte tensor map a kernel receives as a `const __grid_constant__`
// parameter. TensorMap comes from gpu_target/tensor_map.hpp, which each
// build's include path supplies: CUtensorMap for nvcc (target/ here); for the
// GPU emulator an emulated map of the same size and alignment that the
// emulated TMA instructions read (tests/support/simt/target).
#pragma once

#include <cstdint>

#include "gpu_target/tensor_map.hpp"

namespace mla::cuda_flash::sm90 {

// Swizzle of a shared-memory tile, valued as the wgmma matrix descriptor's
// bits 62-63 encode it. The tensor map that fills a tile and every descriptor
// that reads it must name the same mode.
enum class Swizzle : int { none = 0, bytes32 = 3, bytes64 = 2, bytes128 = 1 };

// Bytes of one swizzle row (the span within which 16-byte chunks are permuted); 0 for none.
constexpr unsigned swizzle_bytes(Swizzle swizzle) {
  return swizzle == Swizzle::bytes128  ? 128u
         : swizzle == Swizzle::bytes64 ? 64u
         : swizzle == Swizzle::bytes32 ? 32u
                                       : 0u;
}

struct TensorMapSpec {
  const void* base = nullptr;           // global address, 16-byte aligned
  int rank = 0;                         // 2..5
  int element_bytes = 0;                // 2 for bf16/fp16
  std::uint64_t dims[5] = {};           // elements, innermost first
  std::uint64_t strides_bytes[4] = {};  // stride of dims[1..rank-1] in bytes, multiples of 16
  std::uint32_t box[5] = {};            // box size per dim; box[0] * element_bytes <= swizzle span
  Swizzle swizzle = Swizzle::none;      // must agree with the descriptors that read the box
};

// Encodes `spec` with cuTensorMapEncodeTiled, reached through the runtime's
// driver entry point (no link against the driver library); out-of-bounds
// elements of a box are zero-filled on load and dropped on store. Throws
// mla::Error(invalid_argument) naming the field when the spec is invalid and
// Error(device) when the driver refuses it. Under the emulator the same
// function validates the spec the same way and builds the emulated map.
TensorMap make_tensor_map(const TensorMapSpec& spec);

}  // namespace mla::cuda_flash::sm90
