// Storage types and float conversions of the element dtypes, for the kernels
// in backends/cuda_hip that are written once for every dtype (the LSE merge,
// the MLA step's gather and up-projection).
#pragma once

#include <cstdint>

#include "gpu_device.hpp"
#include "gpu_namespace.hpp"
#include "host_device.hpp"
#include "mla/dtype.hpp"
#include "numeric.hpp"

namespace mla::MLA_GPU_NAMESPACE {

template <DType D>
struct Element;

template <>
struct Element<DType::float32> {
  using Storage = float;
  static MLA_DEVICE float load(Storage x) { return x; }
  static MLA_DEVICE Storage store(float x) { return x; }
};

template <>
struct Element<DType::float16> {
  using Storage = std::uint16_t;
  static MLA_DEVICE float load(Storage x) { return __half2float(__ushort_as_half(x)); }
  static MLA_DEVICE Storage store(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

template <>
struct Element<DType::bfloat16> {
  using Storage = std::uint16_t;
  static MLA_DEVICE float load(Storage x) { return gpu::bf16_to_float(x); }
  static MLA_DEVICE Storage store(float x) { return gpu::float_to_bf16(x); }
};

template <>
struct Element<DType::float8_e4m3> {
  using Storage = std::uint8_t;
  static MLA_DEVICE float load(Storage x) { return gpu::fp8_e4m3_to_float(x); }
  static MLA_DEVICE Storage store(float x) { return gpu::float_to_fp8_e4m3(x); }
};

}  // namespace mla::MLA_GPU_NAMESPACE
