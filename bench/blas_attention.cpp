#include "blas_attention.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace mla::bench {

const char* blas_single_thread_core() {
  openblas_set_num_threads(1);
  return openblas_get_corename();
}

void BlasAttention::run(const float* q, const float* k, const float* v, float* out,
                        const std::vector<std::int32_t>& cu_seqlens) {
  const int q_row = heads * qk_dim;  // row stride of q and k in floats
  const int v_row = heads * v_dim;
  std::vector<float> scores;
  for (std::size_t b = 0; b + 1 < cu_seqlens.size(); ++b) {
    const int begin = cu_seqlens[b];
    const int s = cu_seqlens[b + 1] - begin;
    if (s == 0) continue;
    scores.resize(static_cast<std::size_t>(s) * static_cast<std::size_t>(s));
    for (int h = 0; h < heads; ++h) {
      const float* qh = q + static_cast<std::ptrdiff_t>(begin) * q_row + h * qk_dim;
      const float* kh = k + static_cast<std::ptrdiff_t>(begin) * q_row + h * qk_dim;
      const float* vh = v + static_cast<std::ptrdiff_t>(begin) * v_row + h * v_dim;
      float* oh = out + static_cast<std::ptrdiff_t>(begin) * v_row + h * v_dim;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, qk_dim, scale, qh, q_row, kh, q_row, 0.0f,
                  scores.data(), s);
      for (int i = 0; i < s; ++i) {
        float* row = scores.data() + static_cast<std::ptrdiff_t>(i) * s;
        const float row_max = *std::max_element(row, row + i + 1);
        float sum = 0.0f;
        for (int j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - row_max);
          sum += row[j];
        }
        const float inverse = 1.0f / sum;
        for (int j = 0; j <= i; ++j) row[j] *= inverse;
        std::fill(row + i + 1, row + s, 0.0f);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, v_dim, s, 1.0f, scores.data(), s, vh, v_row, 0.0f, oh,
                  v_row);
    }
  }
}

}  // namespace mla::bench
