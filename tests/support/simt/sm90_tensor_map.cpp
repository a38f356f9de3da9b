// make_tensor_map under the emulator: the same checks as the GPU build, then
// the plain fields the emulated TMA instructions read.
#include "cuda/sm90_tensor_map.hpp"

#include "cuda/sm90_tensor_map_check.hpp"

namespace mla::cuda_flash::sm90 {

TensorMap make_tensor_map(const TensorMapSpec& spec) {
  check_tensor_map_spec(spec);
  TensorMap map{};
  map.base = spec.base;
  for (int i = 0; i < 5; ++i) {
    map.dims[i] = i < spec.rank ? spec.dims[i] : 1;
    map.box[i] = i < spec.rank ? spec.box[i] : 1;
  }
  for (int i = 0; i < 4; ++i) map.strides_bytes[i] = i + 1 < spec.rank ? spec.strides_bytes[i] : 0;
  map.rank = spec.rank;
  map.element_bytes = spec.element_bytes;
  map.swizzle = static_cast<std::int32_t>(spec.swizzle);
  map.magic = TensorMap::valid_magic;
  return map;
}

}  // namespace mla::cuda_flash::sm90
