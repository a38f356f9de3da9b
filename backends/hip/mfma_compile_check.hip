// Compiles the fp8 MFMA product (v_mfma_f32_32x32x16_fp8_fp8) on its own for
// every MFMA target of the build: the attention kernel calls it only in its
// e4m3 instantiations, which only CDNA3's rows compile. Not linked into the
// library.
#include "hip/mfma.hpp"

__global__ void mla_mfma_fp8_compile_check(const long* a, const long* b, float* out) {
  using mla::hip_flash::mfma::Accumulator;
  Accumulator acc = {};
  acc = mla::hip_flash::mfma::product_fp8(a[threadIdx.x], b[threadIdx.x], acc);
  for (int i = 0; i < 16; ++i) out[threadIdx.x * 16 + i] = acc[i];
}
