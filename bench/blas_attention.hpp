// The attention a user would write without this library: per (sequence, head)
// the full score matrix by one SGEMM, causal mask and softmax row by row,
// then one SGEMM with V. fp32, OpenBLAS, one thread. Memory grows with the
// square of the sequence (one s x s score matrix, reused across heads).
#pragma once

#include <cstdint>
#include <vector>

namespace mla::bench {

struct BlasAttention {
  int heads = 16;
  int qk_dim = 192;
  int v_dim = 128;
  float scale = 1.0f;

  // q [N, H, dqk], k [N, H, dqk], v [N, H, V], out [N, H, V], all contiguous
  // fp32; causal self-attention of each sequence of `cu_seqlens`.
  void run(const float* q, const float* k, const float* v, float* out, const std::vector<std::int32_t>& cu_seqlens);
};

// Sets OpenBLAS to one thread and returns its kernel name ("Haswell", ...).
const char* blas_single_thread_core();

}  // namespace mla::bench
