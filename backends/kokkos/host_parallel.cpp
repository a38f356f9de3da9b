// Per-thread scratch of the KOKKOS kernels; see host_parallel.hpp.
#include "host_parallel.hpp"

#include <memory>
#include <new>

namespace mla::kokkos {
namespace {

struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

struct ThreadScratch {
  std::unique_ptr<float[], AlignedDelete> data;
  std::size_t floats = 0;
};

}  // namespace

float* thread_scratch(std::size_t floats) {
  thread_local ThreadScratch scratch;
  if (scratch.floats < floats) {
    scratch.data.reset(static_cast<float*>(::operator new[](floats * sizeof(float), std::align_val_t{64})));
    scratch.floats = floats;
  }
  return scratch.data.get();
}

}  // namespace mla::kokkos
