// Caller tensors as unmanaged Kokkos views, and the element types behind
// each DType. The kernels template on DType so loads and stores inline.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "flash_math.hpp"
#include "mla/dtype.hpp"
#include "mla/tensor.hpp"

namespace mla::kokkos {

// The backend serves the host queue, so kernels run on the default host
// execution space (Serial in Debian's Kokkos, OpenMP or Threads in a user's).
// A Kokkos-CUDA/HIP build could run the same functors on a GPU queue by
// swapping this space for Kokkos::DefaultExecutionSpace and binding the
// queue's stream to an execution space instance.
using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using MemSpace = ExecSpace::memory_space;

template <DType kDType>
struct Element;

template <>
struct Element<DType::float32> {
  using type = float;
  KOKKOS_INLINE_FUNCTION static float load(float value) { return value; }
  KOKKOS_INLINE_FUNCTION static float store(float value) { return value; }
};

template <>
struct Element<DType::float16> {
  using type = std::uint16_t;
  KOKKOS_INLINE_FUNCTION static float load(std::uint16_t bits) { return half_to_float(bits); }
  KOKKOS_INLINE_FUNCTION static std::uint16_t store(float value) { return float_to_half(value); }
};

template <>
struct Element<DType::bfloat16> {
  using type = std::uint16_t;
  KOKKOS_INLINE_FUNCTION static float load(std::uint16_t bits) { return bf16_to_float(bits); }
  KOKKOS_INLINE_FUNCTION static std::uint16_t store(float value) { return float_to_bf16(value); }
};

template <>
struct Element<DType::float8_e4m3> {
  using type = std::uint8_t;
  KOKKOS_INLINE_FUNCTION static std::uint8_t store(float value) { return float_to_fp8_e4m3(value); }
};

template <class T, int kRank>
struct StridedViewType;
template <class T>
struct StridedViewType<T, 2> {
  using type = Kokkos::View<T**, Kokkos::LayoutStride, MemSpace, Kokkos::MemoryUnmanaged>;
};
template <class T>
struct StridedViewType<T, 3> {
  using type = Kokkos::View<T***, Kokkos::LayoutStride, MemSpace, Kokkos::MemoryUnmanaged>;
};

// An unmanaged view of the caller's memory with the caller's strides. The
// backend has checked rank, dtype and that strides are non-negative.
template <class T, int kRank>
typename StridedViewType<T, kRank>::type wrap(const TensorView& view) {
  using ViewType = typename StridedViewType<T, kRank>::type;
  auto n = [&](int dim) { return static_cast<std::size_t>(view.shape[static_cast<std::size_t>(dim)]); };
  auto s = [&](int dim) { return static_cast<std::size_t>(view.stride[static_cast<std::size_t>(dim)]); };
  T* data = static_cast<T*>(view.data);
  if constexpr (kRank == 2) {
    return ViewType(data, Kokkos::LayoutStride(n(0), s(0), n(1), s(1)));
  } else {
    return ViewType(data, Kokkos::LayoutStride(n(0), s(0), n(1), s(1), n(2), s(2)));
  }
}

}  // namespace mla::kokkos
