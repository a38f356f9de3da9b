// Where each lane's data sits for the 32x32 MFMA products the HIP_FLASH kernel
// uses, and the identities the kernel relies on. Pure index functions, used by
// the kernel and checked on the host by tests/hip/mfma_layout_test.cpp, which
// emulates the instructions from these tables.
//
// Facts from AMD's CDNA ISA documents (matrix instruction calculator), for
// v_mfma_f32_32x32x8{f16,bf16_1k}: one wave of 64 lanes computes
// D[32][32] = A[32][8] * B[8][32] + C, every lane holding
//   A: 4 values, row i = lane % 32, k = 4 * (lane / 32) + e   (e = 0..3)
//   B: 4 values, col j = lane % 32, k = 4 * (lane / 32) + e
//   C/D: 16 floats, col j = lane % 32, row i = 8 * (r / 4) + 4 * (lane / 32) + r % 4
// gfx908 has no bf16_1k form; v_mfma_f32_32x32x4bf16 takes 2 values per lane
// (k = 2 * (lane / 32) + e) and the kernel issues two of them per 8-wide step,
// one with e = 0..1 of the 4-value operands and one with e = 2..3. Both
// operands are split the same way, so the two products together sum over the
// same 8 k as the single wide one (k is only reordered).
//
// The kernel computes S^T = K Q^T and O^T += V^T P^T (transposed products):
// then a lane's accumulators all belong to one query row (lane % 32), the
// softmax needs only one cross-lane step (lane ^ 32), and the S^T accumulators
// of keys 8m..8m+7 are, register for register, the B operand of step m of the
// second product (see p_register below), so P never leaves registers.
#pragma once

#include "mla/detail/host_device.hpp"

namespace mla::hip_flash::mfma {

inline constexpr int wave_size = 64;      // MFMA runs on wave64 (every CDNA part)
inline constexpr int tile = 32;           // M = N = 32
inline constexpr int k_step = 8;          // k covered by one 32x32x8 product
inline constexpr int operand_values = 4;  // per lane and k-step
inline constexpr int accumulators = 16;   // per lane

// Row of A (or column of B) a lane holds, and the k of its value e.
MLA_HOST_DEVICE constexpr int operand_row(int lane) { return lane % tile; }
MLA_HOST_DEVICE constexpr int operand_k(int lane, int e) { return 4 * (lane / tile) + e; }

// Column and row of accumulator r.
MLA_HOST_DEVICE constexpr int acc_col(int lane) { return lane % tile; }
MLA_HOST_DEVICE constexpr int acc_row(int lane, int r) { return 8 * (r / 4) + 4 * (lane / tile) + r % 4; }

// gfx908's v_mfma_f32_32x32x4bf16 (k = 0..3): the k of a lane's value e = 0..1.
MLA_HOST_DEVICE constexpr int narrow_operand_k(int lane, int e) { return 2 * (lane / tile) + e; }

// Accumulator register holding value e of the B operand for k-step `step`
// (keys 8 * step .. 8 * step + 7 of a 32-key S^T tile).
MLA_HOST_DEVICE constexpr int p_register(int step, int e) { return 4 * step + e; }

// The identity behind p_register: accumulator row of register 4m + e is the
// operand k of value e, shifted by 8m, for every lane.
constexpr bool accumulators_feed_operands() {
  for (int lane = 0; lane < wave_size; ++lane) {
    if (acc_col(lane) != operand_row(lane)) return false;
    for (int step = 0; step < tile / k_step; ++step) {
      for (int e = 0; e < operand_values; ++e) {
        if (acc_row(lane, p_register(step, e)) != k_step * step + operand_k(lane, e)) return false;
      }
    }
  }
  return true;
}
static_assert(accumulators_feed_operands(), "S^T accumulators must be the B operands of O^T += V^T P^T");

}  // namespace mla::hip_flash::mfma
