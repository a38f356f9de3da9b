// Semantics of the warp-wide instructions the kernels use. Written from the
// PTX ISA's fragment tables (ldmatrix, mma.m16n8k16) and AMD's CDNA matrix
// instruction tables (v_mfma_f32_32x32x8*, v_mfma_f32_32x32x4bf16), not from
// the kernels' own layout headers: a kernel that misreads the ISA and a layout
// header that agrees with it must still fail here.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "block.hpp"
#include "mla/detail/numeric.hpp"
#include "simt/sm80_layout.hpp"

namespace mla::simt {
namespace {

template <class T>
const T& in_of(const Block& block, int thread) {
  return *reinterpret_cast<const T*>(block.threads[static_cast<std::size_t>(thread)].in);
}
template <class T>
T& out_of(Block& block, int thread) {
  return *reinterpret_cast<T*>(block.threads[static_cast<std::size_t>(thread)].out);
}

float to_float(Element element, std::uint16_t bits) {
  return element == Element::bfloat16 ? numeric::bf16_to_float(bits) : numeric::half_to_float(bits);
}

std::uint16_t low(std::uint32_t r) { return static_cast<std::uint16_t>(r & 0xffffu); }
std::uint16_t high(std::uint32_t r) { return static_cast<std::uint16_t>(r >> 16); }
std::uint32_t pack(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (std::uint32_t{hi} << 16);
}

// ---- ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16 ----
// Lane 8m + r gives the address of row r of matrix m (16 bytes, 8 b16).
// Without .trans, lane l receives in register m the elements (row l/4,
// cols 2(l%4), 2(l%4)+1) of matrix m; with .trans, (rows 2(l%4), 2(l%4)+1, col l/4).
struct LdmatrixIn {
  std::uint32_t address;
  int matrices;
  bool trans;
};
struct LdmatrixOut {
  std::uint32_t regs[4];
};

void ldmatrix_compute(Block& block, int first) {
  const LdmatrixIn& head = in_of<LdmatrixIn>(block, first);
  std::uint16_t m[4][8][8];  // [matrix][row][col]
  if (cost_counting()) {
    std::vector<std::pair<int, std::uint32_t>> rows;
    for (int lane = 0; lane < 8 * head.matrices; ++lane)
      rows.emplace_back(lane, in_of<LdmatrixIn>(block, first + lane).address);
    count_shared_access(rows, chunk_bytes);
  }
  for (int matrix = 0; matrix < head.matrices; ++matrix) {
    for (int row = 0; row < 8; ++row) {
      const int lane = 8 * matrix + row;
      const LdmatrixIn& in = in_of<LdmatrixIn>(block, first + lane);
      if (in.matrices != head.matrices || in.trans != head.trans) {
        block.fail("ldmatrix: lanes disagree on the shape (.x" + std::to_string(in.matrices) + " vs .x" +
                   std::to_string(head.matrices) + ")");
      }
      // A row is read by the lane that gave its address: messages name that lane.
      Thread& reader = block.threads[static_cast<std::size_t>(first + lane)];
      Thread* const computing = current_thread;
      current_thread = &reader;
      block.check_read(first + lane, in.address, "ldmatrix row", reader.site);
      current_thread = computing;
      std::memcpy(m[matrix][row], block.bytes(in.address), chunk_bytes);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    LdmatrixOut& out = out_of<LdmatrixOut>(block, first + lane);
    const int g = lane / 4;
    const int c = 2 * (lane % 4);
    for (int matrix = 0; matrix < head.matrices; ++matrix) {
      out.regs[matrix] =
          head.trans ? pack(m[matrix][c][g], m[matrix][c + 1][g]) : pack(m[matrix][g][c], m[matrix][g][c + 1]);
    }
  }
}

// ---- mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 ----
// groupID g = lane / 4, threadID_in_group t = lane % 4.
//   A a0..a7 (2 per register, lower index in the low half):
//     row g for a0,a1,a4,a5, g+8 for a2,a3,a6,a7; col 2t + (i & 1), +8 for a4..a7
//   B b0..b3: row (k) 2t + (i & 1), +8 for b2,b3; col (n) g
//   C/D c0..c3: row g, g+8 for c2,c3; col 2t + (i & 1)
struct MmaIn {
  float d[4];
  std::uint32_t a[4];
  std::uint32_t b[2];
  Element element;
};
struct MmaOut {
  float d[4];
};

std::uint16_t half_of(std::uint32_t reg, int i) { return (i & 1) ? high(reg) : low(reg); }

void mma_compute(Block& block, int first) {
  const Element element = in_of<MmaIn>(block, first).element;
  count_tensor_flops(2 * 16 * 8 * 16);
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaIn& in = in_of<MmaIn>(block, first + lane);
    if (in.element != element) block.fail("mma.sync: lanes disagree on the element type");
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = g + ((i / 2) % 2) * 8;
      const int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      a[row][col] = to_float(element, half_of(in.a[i / 2], i));
    }
    for (int i = 0; i < 4; ++i) {
      const int k = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
      b[k][g] = to_float(element, half_of(in.b[i / 2], i));
    }
    for (int i = 0; i < 4; ++i) c[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = in.d[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    MmaOut& out = out_of<MmaOut>(block, first + lane);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i >= 2 ? 8 : 0);
      const int col = 2 * t + (i & 1);
      // Products of 16-bit floats are exact in double; one rounding at the end.
      double sum = c[row][col];
      for (int k = 0; k < 16; ++k) sum += static_cast<double>(a[row][k]) * b[k][col];
      out.d[i] = static_cast<float>(sum);
    }
  }
}

// ---- mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89+) ----
// Four e4m3 bytes per register (sm80_layout.hpp: value i is byte i % 4 of
// register i / 4); C and D as for m16n8k16. Every product of two e4m3 values
// is exact in double and so is a sum of 32 of them: one rounding at the end.
// A NaN byte (0x7f / 0xff) gives NaN where it is read.
struct MmaFp8In {
  float d[4];
  std::uint32_t a[4];
  std::uint32_t b[2];
};

float e4m3_byte(std::uint32_t reg, int byte) {
  return numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>((reg >> (8 * byte)) & 0xffu));
}

void mma_fp8_compute(Block& block, int first) {
  count_tensor_flops(2 * 16 * 8 * 32);
  float a[16][32], b[32][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaFp8In& in = in_of<MmaFp8In>(block, first + lane);
    for (int i = 0; i < 16; ++i) {
      const sm80_layout::Coord at = sm80_layout::mma_k32_a(lane, i);
      a[at.row][at.col] = e4m3_byte(in.a[i / 4], i % 4);
    }
    for (int i = 0; i < 8; ++i) {
      const sm80_layout::Coord at = sm80_layout::mma_k32_b(lane, i);
      b[at.row][at.col] = e4m3_byte(in.b[i / 4], i % 4);
    }
    for (int i = 0; i < 4; ++i) {
      const sm80_layout::Coord at = sm80_layout::mma_k32_c(lane, i);
      c[at.row][at.col] = in.d[i];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    MmaOut& out = out_of<MmaOut>(block, first + lane);
    for (int i = 0; i < 4; ++i) {
      const sm80_layout::Coord at = sm80_layout::mma_k32_c(lane, i);
      double sum = c[at.row][at.col];
      for (int k = 0; k < 32; ++k) sum += static_cast<double>(a[at.row][k]) * b[k][at.col];
      out.d[i] = static_cast<float>(sum);
    }
  }
}

// ---- v_mfma_f32_32x32x8{f16,bf16_1k} and v_mfma_f32_32x32x4bf16 ----
// One 32x32 output block, wave64, `values` (4 or 2) operand values per lane:
//   A[i][k]: lane i + 32 * (k / values), value k % values
//   B[k][j]: lane j + 32 * (k / values), value k % values
//   D[i][j]: lane j + 32 * ((i / 4) % 2), register (i % 4) + 4 * (i / 8)
struct MfmaIn {
  float acc[16];
  std::uint16_t a[4];
  std::uint16_t b[4];
  Element element;
  int values;
};
struct MfmaOut {
  float acc[16];
};

// The row of D that register r of `lane` holds (the layout above).
int d_row(int lane, int r) { return 8 * (r / 4) + 4 * (lane / 32) + r % 4; }

// Every lane's D = C + A B over the first `depth` k, one fp64 sum per
// output: the end of each 32x32 MFMA form, whatever its operand type.
template <int K>
void write_products(Block& block, int first, const float (&a)[32][K], const float (&b)[K][32], const float (&c)[32][32],
                    int depth) {
  for (int lane = 0; lane < 64; ++lane) {
    MfmaOut& out = out_of<MfmaOut>(block, first + lane);
    const int j = lane % 32;
    for (int r = 0; r < 16; ++r) {
      const int i = d_row(lane, r);
      double sum = c[i][j];
      for (int k = 0; k < depth; ++k) sum += static_cast<double>(a[i][k]) * b[k][j];
      out.acc[r] = static_cast<float>(sum);
    }
  }
}

void mfma_compute(Block& block, int first) {
  const MfmaIn& head = in_of<MfmaIn>(block, first);
  const int values = head.values;
  const int depth = 2 * values;  // k of one product
  count_tensor_flops(2ull * 32 * 32 * static_cast<std::uint64_t>(depth));
  float a[32][8], b[8][32], c[32][32];
  for (int lane = 0; lane < 64; ++lane) {
    const MfmaIn& in = in_of<MfmaIn>(block, first + lane);
    if (in.element != head.element || in.values != values) block.fail("MFMA: lanes disagree on the instruction");
    for (int e = 0; e < values; ++e) {
      const int k = (lane / 32) * values + e;
      a[lane % 32][k] = to_float(head.element, in.a[e]);
      b[k][lane % 32] = to_float(head.element, in.b[e]);
    }
    for (int r = 0; r < 16; ++r) c[d_row(lane, r)][lane % 32] = in.acc[r];
  }
  write_products(block, first, a, b, c, depth);
}

// ---- v_mfma_f32_32x32x16_fp8_fp8 (CDNA3) ----
// As the 16-bit forms with 8 values per lane:
//   A[i][k]: lane i + 32 * (k / 8), byte k % 8;  B[k][j]: lane j + 32 * (k / 8), byte k % 8
//   D[i][j]: lane j + 32 * ((i / 4) % 2), register (i % 4) + 4 * (i / 8)
struct MfmaFp8In {
  float acc[16];
  std::uint64_t a;
  std::uint64_t b;
};

float fnuz_byte(std::uint64_t word, int byte) {
  return fp8_e4m3fnuz_to_float(static_cast<std::uint8_t>((word >> (8 * byte)) & 0xffu));
}

void mfma_fp8_compute(Block& block, int first) {
  count_tensor_flops(2ull * 32 * 32 * 16);
  float a[32][16], b[16][32], c[32][32];
  for (int lane = 0; lane < 64; ++lane) {
    const MfmaFp8In& in = in_of<MfmaFp8In>(block, first + lane);
    for (int e = 0; e < 8; ++e) {
      const int k = (lane / 32) * 8 + e;
      a[lane % 32][k] = fnuz_byte(in.a, e);
      b[k][lane % 32] = fnuz_byte(in.b, e);
    }
    for (int r = 0; r < 16; ++r) c[d_row(lane, r)][lane % 32] = in.acc[r];
  }
  write_products(block, first, a, b, c, 16);
}

// ---- shuffles ----
struct ShuffleIn {
  std::uint32_t value;
  int lane_mask;
  int width;
};

void shfl_xor_compute(Block& block, int first) {
  const int lanes = block.config->warp_size;
  const ShuffleIn& head = in_of<ShuffleIn>(block, first);
  for (int lane = 0; lane < lanes; ++lane) {
    const ShuffleIn& in = in_of<ShuffleIn>(block, first + lane);
    if (in.lane_mask != head.lane_mask || in.width != head.width) {
      block.fail("shfl_xor: lanes disagree on the lane mask or width");
    }
    const int source = lane ^ in.lane_mask;
    // A source outside the lane's width segment leaves the lane its own value.
    const bool inside = source < lanes && source / in.width == lane / in.width;
    out_of<std::uint32_t>(block, first + lane) = in_of<ShuffleIn>(block, first + (inside ? source : lane)).value;
  }
}

}  // namespace

void ldmatrix(int matrices, bool trans, std::uint32_t* regs, std::uint32_t address, Site site) {
  const LdmatrixIn in{address, matrices, trans};
  LdmatrixOut out{};
  collective(trans ? "ldmatrix.trans" : "ldmatrix", site, &in, sizeof in, &out, sizeof out, ldmatrix_compute);
  for (int i = 0; i < matrices; ++i) regs[i] = out.regs[i];
}

void mma_m16n8k16(Element element, float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1,
                  Site site) {
  MmaIn in{};
  std::memcpy(in.d, d, sizeof in.d);
  std::memcpy(in.a, a, sizeof in.a);
  in.b[0] = b0;
  in.b[1] = b1;
  in.element = element;
  MmaOut out{};
  collective("mma.sync.m16n8k16", site, &in, sizeof in, &out, sizeof out, mma_compute);
  std::memcpy(d, out.d, sizeof out.d);
}

void mma_m16n8k32_e4m3(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1, Site site) {
  MmaFp8In in{};
  std::memcpy(in.d, d, sizeof in.d);
  std::memcpy(in.a, a, sizeof in.a);
  in.b[0] = b0;
  in.b[1] = b1;
  MmaOut out{};
  collective("mma.sync.m16n8k32.e4m3", site, &in, sizeof in, &out, sizeof out, mma_fp8_compute);
  std::memcpy(d, out.d, sizeof out.d);
}

void mfma_32x32x8(Element element, float (&acc)[16], const std::uint16_t (&a)[4], const std::uint16_t (&b)[4],
                  Site site) {
  MfmaIn in{};
  std::memcpy(in.acc, acc, sizeof in.acc);
  std::memcpy(in.a, a, sizeof a);
  std::memcpy(in.b, b, sizeof b);
  in.element = element;
  in.values = 4;
  MfmaOut out{};
  collective("v_mfma_f32_32x32x8", site, &in, sizeof in, &out, sizeof out, mfma_compute);
  std::memcpy(acc, out.acc, sizeof out.acc);
}

float fp8_e4m3fnuz_to_float(std::uint8_t code) {
  if (code == 0x80) return std::numeric_limits<float>::quiet_NaN();
  const int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  // Bias 8: subnormals are mantissa * 2^-10, normals (1 + mantissa / 8) * 2^(exponent - 8).
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -10)
                                        : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 8);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

void mfma_32x32x16_fp8(float (&acc)[16], std::uint64_t a, std::uint64_t b, Site site) {
  MfmaFp8In in{};
  std::memcpy(in.acc, acc, sizeof in.acc);
  in.a = a;
  in.b = b;
  MfmaOut out{};
  collective("v_mfma_f32_32x32x16_fp8_fp8", site, &in, sizeof in, &out, sizeof out, mfma_fp8_compute);
  std::memcpy(acc, out.acc, sizeof out.acc);
}

void mfma_32x32x4_bf16(float (&acc)[16], const std::uint16_t (&a)[2], const std::uint16_t (&b)[2], Site site) {
  MfmaIn in{};
  std::memcpy(in.acc, acc, sizeof in.acc);
  std::memcpy(in.a, a, sizeof a);
  std::memcpy(in.b, b, sizeof b);
  in.element = Element::bfloat16;
  in.values = 2;
  MfmaOut out{};
  collective("v_mfma_f32_32x32x4bf16", site, &in, sizeof in, &out, sizeof out, mfma_compute);
  std::memcpy(acc, out.acc, sizeof out.acc);
}

std::uint32_t shfl_xor(std::uint32_t value, int lane_mask, int width, std::uint64_t member_mask, Site site) {
  const Block& block = *current_block;
  const int lanes = block.config->warp_size;
  const std::uint64_t full = lanes == 64 ? ~0ull : (1ull << lanes) - 1;
  if ((member_mask & full) != full) {
    block.fail("shfl_xor at " + std::string(site.file) + ":" + std::to_string(site.line) +
               ": partial member masks are not emulated; every lane must take part");
  }
  if (width <= 0 || width > lanes || (width & (width - 1)) != 0) {
    block.fail("shfl_xor with width " + std::to_string(width));
  }
  const ShuffleIn in{value, lane_mask, width};
  std::uint32_t out = 0;
  collective("shfl_xor", site, &in, sizeof in, &out, sizeof out, shfl_xor_compute);
  return out;
}

}  // namespace mla::simt
