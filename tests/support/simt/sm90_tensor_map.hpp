// The emulated tensor map: what cuTensorMapEncodeTiled would encode, in plain
// fields, with CUtensorMap's size (128 bytes) and alignment (64), so a kernel
// that copies or passes it by value behaves as on the GPU. Only the emulated
// TMA instructions read it (simt/sm90.hpp); `magic` tells a map built by
// make_tensor_map from poison or zeros.
#pragma once

#include <cstdint>

namespace mla::cuda_flash::sm90 {

struct alignas(64) TensorMap {
  static constexpr std::uint32_t valid_magic = 0x544d4150u;  // "TMAP"
  const void* base;
  std::uint64_t dims[5];
  std::uint64_t strides_bytes[4];  // of dims[1..rank-1]
  std::uint32_t box[5];
  std::int32_t rank;
  std::int32_t element_bytes;
  std::int32_t swizzle;  // Swizzle's descriptor encoding
  std::uint32_t magic;
};
static_assert(sizeof(TensorMap) == 128, "CUtensorMap is 128 bytes");

}  // namespace mla::cuda_flash::sm90
