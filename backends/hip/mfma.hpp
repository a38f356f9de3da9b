// The MFMA tile product of the HIP_FLASH kernel and the device macros that
// gate it. Included only by HIP sources and by the GPU emulator's host clang
// compile of the kernel (tests/support/simt). The products and the macros come from
// gpu_target/mfma.hpp, which each build's include path supplies: target/ here
// for a HIP compile, tests/support/simt/target for the emulator (the emulator's
// products, the device surface of simt/hip_device.hpp).
//
// Gating happens twice (as in ggml): here by device macro, derived from the
// gfx target clang is compiling for, and on the host by the list of targets
// the build compiled (backends/hip/entry.cpp), so a target without MFMA never
// gets a launch. The macros read clang's own __gfx*__ defines; nothing fakes
// another vendor's arch macro.
#pragma once

#include "mfma_layout.hpp"
#include "mla/tensor.hpp"

namespace mla::hip_flash::mfma {

// One lane's share of a k-step: 4 fp16 or bf16 values as raw 16-bit words.
using Operand = short __attribute__((ext_vector_type(4)));
// One lane's 16 accumulators of a 32x32 fp32 tile.
using Accumulator = float __attribute__((ext_vector_type(16)));

}  // namespace mla::hip_flash::mfma

#include "gpu_target/mfma.hpp"

// After the device surface: its qualifiers are defined now.
#include "mla/detail/numeric.hpp"

namespace mla::hip_flash::mfma {

// float -> the 16-bit word of an operand in dtype D, rounded to nearest even.
template <DType D>
__device__ inline short to_bits(float value) {
  if constexpr (D == DType::bfloat16) {
    return static_cast<short>(numeric::float_to_bf16(value));
  } else {
    return __builtin_bit_cast(short, static_cast<_Float16>(value));
  }
}

}  // namespace mla::hip_flash::mfma
