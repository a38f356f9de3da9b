// Storage types and float conversions of the element dtypes, for the kernels
// in backends/cuda_hip that are written once for every dtype (the LSE merge,
// the MLA step's gather and up-projection): the shared codecs of
// mla/detail/numeric.hpp, except that fp16 uses the GPU's own conversion
// instructions (the same bits for every number; the emulator maps them back
// to the shared codec).
#pragma once

#include <cstdint>

#include "gpu_device.hpp"
#include "gpu_namespace.hpp"
#include "mla/detail/host_device.hpp"
#include "mla/detail/numeric.hpp"
#include "mla/tensor.hpp"

namespace mla::MLA_GPU_NAMESPACE {

template <DType D>
struct Element : numeric::Element<D> {};

template <>
struct Element<DType::float16> {
  using Storage = std::uint16_t;
  static MLA_DEVICE float load(Storage x) { return __half2float(__ushort_as_half(x)); }
  static MLA_DEVICE Storage store(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

}  // namespace mla::MLA_GPU_NAMESPACE
