// Caller tensors as unmanaged Kokkos views, and the element types behind
// each DType. The kernels template on DType so loads and stores inline.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "flash_math.hpp"
#include "mla/detail/numeric.hpp"
#include "mla/tensor.hpp"

namespace mla::kokkos {

// The backend serves the host queue, so kernels run on the default host
// execution space (Serial in Debian's Kokkos, OpenMP or Threads in a user's).
// The kernels keep their scratch in host memory per OS thread
// (host_parallel.hpp): they are host kernels, not device-portable functors.
using ExecSpace = Kokkos::DefaultHostExecutionSpace;
using MemSpace = ExecSpace::memory_space;

// Storage type and codecs of each element dtype: the shared ones.
template <DType kDType>
using Element = numeric::Element<kDType>;

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
