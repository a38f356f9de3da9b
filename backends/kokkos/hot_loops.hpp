// The two loops where the KOKKOS kernel spends its time, the register-blocked
// micro-GEMM (both attention products), the online-softmax update and the
// staging of K and V rows, compiled
// once per kernel variant (host_isa.hpp) as out-of-line functions:
// HotLoops<isa>::micro_gemm, softmax_block and load_row.
//
// Each variant is the same always-inline body wrapped in a function carrying
// the variant's target attribute, so the compiler vectorises it for that ISA
// while the rest of the translation unit stays baseline code. Keeping them out
// of line also gives each the same code wherever it is called from.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flash_math.hpp"
#include "host_isa.hpp"

namespace mla::kokkos {

// Online softmax over one key tile for the kNc queries [r0, r0 + kNc), in log2
// units, lane-wise across queries. st is S^T ([key][query], row length kBr);
// on return it holds P^T, row_max / row_sum are the new running max and sum,
// and row_alpha = exp2(old max - new max) rescales the accumulated output.
// With `masked` (the diagonal tile of a causal problem), key j is hidden from
// queries r < j - shift.
template <int kBr, int kNc>
KOKKOS_FORCEINLINE_FUNCTION void softmax_block_body(float* st, float* row_max, float* row_sum, float* row_alpha, int r0,
                                                    int cols, bool masked, int shift) {
  if (masked) {
    for (int j = 0; j < cols; ++j) {
      float* s_row = st + j * kBr + r0;
      const int hidden = imin(kNc, imax(0, j - shift - r0));
      for (int r = 0; r < hidden; ++r) s_row[r] = neg_infinity();
    }
  }
  float tile_max[kNc];
  for (int r = 0; r < kNc; ++r) tile_max[r] = neg_infinity();
  for (int j = 0; j < cols; ++j) {
    const float* s_row = st + j * kBr + r0;
    for (int r = 0; r < kNc; ++r) tile_max[r] = s_row[r] > tile_max[r] ? s_row[r] : tile_max[r];
  }
  // A query that has seen no key yet keeps max -inf; subtracting 0 then
  // keeps every exp2 argument -inf (p = 0) instead of NaN.
  float new_max[kNc];
  float offset[kNc];
  for (int r = 0; r < kNc; ++r) {
    const float old_max = row_max[r0 + r];
    new_max[r] = tile_max[r] > old_max ? tile_max[r] : old_max;
    offset[r] = new_max[r] == neg_infinity() ? 0.0f : new_max[r];
    row_alpha[r0 + r] = exp2_nonpositive(old_max - offset[r]);
  }
  float tile_sum[kNc];
  for (int r = 0; r < kNc; ++r) tile_sum[r] = 0.0f;
  for (int j = 0; j < cols; ++j) {
    float* s_row = st + j * kBr + r0;
    for (int r = 0; r < kNc; ++r) {
      const float p = exp2_nonpositive(s_row[r] - offset[r]);
      s_row[r] = p;
      tile_sum[r] += p;
    }
  }
  for (int r = 0; r < kNc; ++r) {
    row_sum[r0 + r] = row_sum[r0 + r] * row_alpha[r0 + r] + tile_sum[r];
    row_max[r0 + r] = new_max[r];
  }
}

// The fp32 value of every e4m3 byte: fp8 K and V rows are staged by table
// lookup, which vectorises as gathers (the conversion's branches do not).
struct Fp8Values {
  float value[256];
  Fp8Values() {
    for (int code = 0; code < 256; ++code) value[code] = numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(code));
  }
};
inline const Fp8Values fp8_values{};

// dst[i] = the fp32 value of src[i * stride], i < n: one staged row of K or
// V. A unit stride gets its own loop, which the compiler vectorises.
template <DType kIn>
KOKKOS_FORCEINLINE_FUNCTION void load_row_body(float* KOKKOS_RESTRICT dst,
                                               const typename numeric::Element<kIn>::Storage* KOKKOS_RESTRICT src,
                                               std::ptrdiff_t stride, int n) {
  if constexpr (kIn == DType::float8_e4m3) {
    const float* KOKKOS_RESTRICT table = fp8_values.value;
    for (int i = 0; i < n; ++i) dst[i] = table[src[i * stride]];
  } else if (stride == 1) {
    for (int i = 0; i < n; ++i) dst[i] = numeric::Element<kIn>::load(src[i]);
  } else {
    for (int i = 0; i < n; ++i) dst[i] = numeric::Element<kIn>::load(src[i * stride]);
  }
}

template <HostIsa kIsa>
struct HotLoops;

#if defined(__GNUC__) || defined(__clang__)
#define MLA_KOKKOS_NOINLINE __attribute__((noinline))
#else
#define MLA_KOKKOS_NOINLINE
#endif

// Below AVX, g++ 12 would rather vectorise the micro-GEMM's depth loop
// (shuffles, accumulators in memory: 8x slower than the register-blocked
// form); without the loop vectoriser the straight-line (SLP) vectoriser
// builds the register blocks. From AVX on, the default choice is the good one.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__AVX__)
#define MLA_KOKKOS_BASELINE_GEMM __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define MLA_KOKKOS_BASELINE_GEMM
#endif

// One variant: ISA is a HostIsa member, GEMM / LOOP the attributes of the
// micro-GEMM and of the softmax copy.
#define MLA_KOKKOS_HOT_LOOPS(ISA, GEMM, LOOP)                                          \
  template <>                                                                          \
  struct HotLoops<HostIsa::ISA> {                                                      \
    template <int kRows, int kCols, class... Args>                                     \
    GEMM MLA_KOKKOS_NOINLINE KOKKOS_FUNCTION static void micro_gemm(Args... args) {    \
      micro_gemm_body<kRows, kCols>(args...);                                          \
    }                                                                                  \
    template <int kBr, int kNc, class... Args>                                         \
    LOOP MLA_KOKKOS_NOINLINE KOKKOS_FUNCTION static void softmax_block(Args... args) { \
      softmax_block_body<kBr, kNc>(args...);                                           \
    }                                                                                  \
    template <DType kIn, class... Args>                                                \
    LOOP MLA_KOKKOS_NOINLINE KOKKOS_FUNCTION static void load_row(Args... args) {      \
      load_row_body<kIn>(args...);                                                     \
    }                                                                                  \
  }

#if MLA_KOKKOS_ISA_DISPATCH
#define MLA_KOKKOS_AVX2 __attribute__((target("avx2,fma")))
#if defined(__clang__)
#define MLA_KOKKOS_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
// g++'s generic tuning would keep 256-bit vectors; the 6x32 block needs zmm.
#define MLA_KOKKOS_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")))
#endif
MLA_KOKKOS_HOT_LOOPS(baseline, MLA_KOKKOS_BASELINE_GEMM, );
MLA_KOKKOS_HOT_LOOPS(avx2, MLA_KOKKOS_AVX2, MLA_KOKKOS_AVX2);
MLA_KOKKOS_HOT_LOOPS(avx512, MLA_KOKKOS_AVX512, MLA_KOKKOS_AVX512);
#else
MLA_KOKKOS_HOT_LOOPS(baseline, MLA_KOKKOS_BASELINE_GEMM, );
#if defined(__AVX__)
MLA_KOKKOS_HOT_LOOPS(avx2, , );  // the build's own target: no attribute needed
#endif
#endif

}  // namespace mla::kokkos
