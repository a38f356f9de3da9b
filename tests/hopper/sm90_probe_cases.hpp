// The probes' inputs, tensor maps and exactly expected outputs, computed on
// the host from the PTX ISA's definitions (simt/sm90_layout.hpp, itself
// cross-checked against CuTe). Shared by the GPU runner and the emulator test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/sm90_tensor_map.hpp"
#include "mla/detail/numeric.hpp"
#include "simt/sm90_layout.hpp"
#include "sm90_probes.cuh"

namespace mla::sm90_probes {

enum class Buffer { none, a, b, out };

struct MapSpec {
  Buffer buffer = Buffer::none;
  std::size_t offset = 0;  // bytes into the buffer
  cuda_flash::sm90::TensorMapSpec spec;
};

struct ProbeCase {
  std::string name;
  Params params;
  unsigned threads = 128;
  std::vector<std::uint16_t> a, b;  // global inputs: bf16 bits, or e4m3 bytes two to an entry (fp8 probes)
  std::vector<std::uint32_t> a_frag;
  std::size_t out_bytes = 0;
  MapSpec maps[3];
  std::vector<unsigned char> expected;  // out_bytes; the output starts as 0xff bytes
};

namespace cases {

inline std::uint16_t bf16(float v) { return numeric::float_to_bf16(v); }

// Small nonzero integers: every product and sum is exact in fp32.
inline std::vector<std::uint16_t> random_values(std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<std::uint16_t> v(count);
  for (auto& x : v) {
    int value = 0;
    while (value == 0) value = dist(gen);
    x = bf16(static_cast<float>(value));
  }
  return v;
}

inline cuda_flash::sm90::TensorMapSpec spec(int rank, std::vector<std::uint64_t> dims,
                                            std::vector<std::uint64_t> strides, std::vector<std::uint32_t> box,
                                            int swizzle, int element_bytes = 2) {
  cuda_flash::sm90::TensorMapSpec s;
  s.rank = rank;
  s.element_bytes = element_bytes;
  for (int i = 0; i < rank; ++i) {
    s.dims[i] = dims[static_cast<std::size_t>(i)];
    s.box[i] = box[static_cast<std::size_t>(i)];
    if (i + 1 < rank) s.strides_bytes[i] = strides[static_cast<std::size_t>(i)];
  }
  s.swizzle = static_cast<cuda_flash::sm90::Swizzle>(swizzle);
  return s;
}

inline int encoding(unsigned span) { return span == 128 ? 1 : span == 64 ? 2 : span == 32 ? 3 : 0; }

inline std::size_t box_bytes(const cuda_flash::sm90::TensorMapSpec& s) {
  std::size_t bytes = static_cast<std::size_t>(s.element_bytes);
  for (int i = 0; i < s.rank; ++i) bytes *= s.box[i];
  return bytes;
}

inline void put_u32(std::vector<unsigned char>& bytes, std::size_t word, std::uint32_t value) {
  std::memcpy(bytes.data() + word * 4, &value, 4);
}

// A K-major operand of `rows` (64) rows and `k` columns of `element_bytes`
// each in the canonical layout for `span`, loaded by one TMA box: its map,
// LBO, SBO and the descriptor advance per k block (32 bytes: 16 bf16 or 32
// e4m3, one wgmma's k). The layouts are the same in bytes for both types.
struct Operand {
  cuda_flash::sm90::TensorMapSpec spec;
  unsigned lbo = 0, sbo = 0, step = 0;
};

inline Operand k_major(unsigned span, int rows, int k, int element_bytes = 2) {
  Operand o;
  const auto eb = static_cast<std::uint64_t>(element_bytes);
  if (span == 0) {
    // Core matrices of 8 rows x 16 bytes: [k / per_row][row][per_row].
    const std::uint64_t per_row = 16 / eb;
    o.spec = spec(3, {per_row, std::uint64_t(rows), std::uint64_t(k) / per_row}, {std::uint64_t(k) * eb, 16},
                  {std::uint32_t(per_row), std::uint32_t(rows), std::uint32_t(std::uint64_t(k) / per_row)}, 0,
                  element_bytes);
    o.lbo = static_cast<unsigned>(rows) * 16;
    o.sbo = 128;
    o.step = 2 * o.lbo;
  } else {
    o.spec = spec(2, {std::uint64_t(k), std::uint64_t(rows)}, {std::uint64_t(k) * eb},
                  {std::uint32_t(k), std::uint32_t(rows)}, encoding(span), element_bytes);
    o.lbo = 16;  // unused by swizzled K-major layouts
    o.sbo = 8 * span;
    o.step = 32;
  }
  return o;
}

// A wgmma probe's operands: their descriptors, ranks and tensor maps, and
// the bytes the TMA loads announce (B's, and A's unless A comes from
// registers).
inline void place_operands(ProbeCase& c, const Operand& a, const Operand& b, bool a_in_registers) {
  Params& p = c.params;
  p.lbo_a = a.lbo;
  p.sbo_a = a.sbo;
  p.a_step = a.step;
  p.lbo_b = b.lbo;
  p.sbo_b = b.sbo;
  p.b_step = b.step;
  p.a_rank = a.spec.rank;
  p.b_rank = b.spec.rank;
  p.box_bytes_a = static_cast<unsigned>(box_bytes(a.spec));
  p.tx_bytes = static_cast<unsigned>(box_bytes(b.spec)) + (a_in_registers ? 0u : p.box_bytes_a);
  c.maps[0] = {Buffer::a, 0, a.spec};
  c.maps[1] = {Buffer::b, 0, b.spec};
}

// The m64n64 fp32 accumulators a wgmma probe writes, thread after thread in
// register order: `product(row, col)` at each register's position.
template <class Product>
void expect_accumulators(ProbeCase& c, Product&& product) {
  c.out_bytes = 128 * 32 * 4;
  c.expected.assign(c.out_bytes, 0);
  for (int t = 0; t < 128; ++t) {
    for (int i = 0; i < 32; ++i) {
      const simt::sm90_layout::Position pos = simt::sm90_layout::accumulator_position(t, i);
      const float sum = product(pos.row, pos.col);
      std::uint32_t bits = 0;
      std::memcpy(&bits, &sum, 4);
      put_u32(c.expected, static_cast<std::size_t>(t * 32 + i), bits);
    }
  }
}

// Small nonzero integers as e4m3 codes (exact products and sums, as
// random_values's), two to an entry of the probe's global input.
inline std::vector<std::uint16_t> random_e4m3_pairs(std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<std::uint16_t> pairs(count / 2);
  for (std::size_t i = 0; i < count; ++i) {
    int value = 0;
    while (value == 0) value = dist(gen);
    const std::uint16_t code = numeric::float_to_fp8_e4m3(static_cast<float>(value));
    pairs[i / 2] = static_cast<std::uint16_t>(pairs[i / 2] | (code << (8 * (i % 2))));
  }
  return pairs;
}

inline float e4m3_at(const std::vector<std::uint16_t>& pairs, std::size_t i) {
  return numeric::fp8_e4m3_to_float(static_cast<std::uint8_t>(pairs[i / 2] >> (8 * (i % 2))));
}

// wgmma m64n64k32 with e4m3 A and B, both K-major (8-bit wgmma takes no
// MN-major operand), A from shared memory or from registers in the
// mma.m16n8k32 layout per warp; fp32 accumulators.
inline ProbeCase wgmma_fp8_case(unsigned span, bool a_in_registers) {
  ProbeCase c;
  c.name = std::string(a_in_registers ? "wgmma_rs" : "wgmma_ss") + "_e4m3_swizzle" + std::to_string(span);
  const int k = span == 0 ? 64 : static_cast<int>(span);  // a row of `span` bytes; two k blocks without swizzle
  const Operand a = k_major(span, 64, k, 1);
  const Operand b = k_major(span, 64, k, 1);
  c.a = random_e4m3_pairs(static_cast<std::size_t>(64 * k), 201 + span);
  c.b = random_e4m3_pairs(static_cast<std::size_t>(64 * k), 301 + span);
  Params& p = c.params;
  p.probe = a_in_registers ? Probe::wgmma_rs : Probe::wgmma_ss;
  p.fp8 = 1;
  p.swizzle_a = p.swizzle_b = encoding(span);
  p.k_blocks = k / 32;
  place_operands(c, a, b, a_in_registers);
  const auto code_at = [&](const std::vector<std::uint16_t>& pairs, int row, int col) {
    return static_cast<std::uint32_t>(
        static_cast<std::uint8_t>(pairs[static_cast<std::size_t>(row * k + col) / 2] >> (8 * ((row * k + col) % 2))));
  };
  if (a_in_registers) {
    c.a_frag.resize(static_cast<std::size_t>(p.k_blocks) * 128 * 4);
    for (int j = 0; j < p.k_blocks; ++j) {
      for (int t = 0; t < 128; ++t) {
        for (int v = 0; v < 16; ++v) {
          const simt::sm90_layout::Position at = simt::sm90_layout::a_fragment_position_k32(t, v);
          c.a_frag[static_cast<std::size_t>((j * 128 + t) * 4 + v / 4)] |= code_at(c.a, at.row, 32 * j + at.col)
                                                                           << (8 * (v % 4));
        }
      }
    }
  }
  expect_accumulators(c, [&](int row, int col) {
    float sum = 0;
    for (int kk = 0; kk < k; ++kk)
      sum +=
          e4m3_at(c.a, static_cast<std::size_t>(row * k + kk)) * e4m3_at(c.b, static_cast<std::size_t>(col * k + kk));
    return sum;
  });
  return c;
}

// B stored [16 k][n] with n contiguous, in the canonical MN-major layout.
inline Operand mn_major(unsigned span, int n) {
  Operand o;
  const int per_row = span == 0 ? 8 : static_cast<int>(span / 2);
  o.spec = spec(3, {std::uint64_t(per_row), 16, std::uint64_t(n / per_row)},
                {std::uint64_t(n) * 2, std::uint64_t(per_row) * 2},
                {std::uint32_t(per_row), 16, std::uint32_t(n / per_row)}, encoding(span));
  if (span == 0) {
    o.lbo = 128;  // the next 8 k rows
    o.sbo = 256;  // the next 8 columns
  } else {
    o.lbo = 16 * span;  // the next span / 2 columns
    o.sbo = 8 * span;   // the next 8 k rows
  }
  return o;
}

inline ProbeCase wgmma_case(unsigned span, bool b_mn_major, bool a_in_registers) {
  ProbeCase c;
  c.name = std::string(a_in_registers ? "wgmma_rs" : "wgmma_ss") + "_swizzle" + std::to_string(span) +
           (b_mn_major ? "_b_mn_major" : "_b_k_major");
  const int ka = span == 0 ? 32 : static_cast<int>(span / 2);
  const int k_used = b_mn_major ? 16 : ka;
  const Operand a = k_major(span, 64, ka);
  const Operand b = b_mn_major ? mn_major(span, 64) : k_major(span, 64, ka);
  c.a = random_values(static_cast<std::size_t>(64 * ka), 1 + span);
  c.b = random_values(b_mn_major ? 16 * 64 : static_cast<std::size_t>(64 * ka), 101 + span);
  Params& p = c.params;
  p.probe = a_in_registers ? Probe::wgmma_rs : Probe::wgmma_ss;
  p.swizzle_a = p.swizzle_b = encoding(span);
  p.b_mn_major = b_mn_major ? 1 : 0;
  p.k_blocks = k_used / 16;
  place_operands(c, a, b, a_in_registers);
  const auto a_at = [&](int m, int k) { return numeric::bf16_to_float(c.a[static_cast<std::size_t>(m * ka + k)]); };
  const auto b_at = [&](int k, int n) {
    return numeric::bf16_to_float(b_mn_major ? c.b[static_cast<std::size_t>(k * 64 + n)]
                                             : c.b[static_cast<std::size_t>(n * ka + k)]);
  };
  if (a_in_registers) {
    c.a_frag.resize(static_cast<std::size_t>(p.k_blocks) * 128 * 4);
    for (int j = 0; j < p.k_blocks; ++j) {
      for (int t = 0; t < 128; ++t) {
        for (int h = 0; h < 8; h += 2) {
          const simt::sm90_layout::Position lo = simt::sm90_layout::a_fragment_position(t, h);
          const simt::sm90_layout::Position hi = simt::sm90_layout::a_fragment_position(t, h + 1);
          const std::uint32_t reg = c.a[static_cast<std::size_t>(lo.row * ka + 16 * j + lo.col)] |
                                    (std::uint32_t{c.a[static_cast<std::size_t>(hi.row * ka + 16 * j + hi.col)]} << 16);
          c.a_frag[static_cast<std::size_t>((j * 128 + t) * 4 + h / 2)] = reg;
        }
      }
    }
  }
  expect_accumulators(c, [&](int row, int col) {
    float sum = 0;
    for (int k = 0; k < k_used; ++k) sum += a_at(row, k) * b_at(k, col);
    return sum;
  });
  return c;
}

// A box of rows x cols at (c0, c1) of a rows_total x cols_total tensor,
// reaching past its end; dumped raw (unswizzled map) and stored back.
inline ProbeCase tma_box_case(unsigned span, int cols_total, int rows_total, int box_cols, int box_rows, int c0,
                              int c1) {
  ProbeCase c;
  c.name = "tma_box_swizzle" + std::to_string(span);
  c.a = random_values(static_cast<std::size_t>(cols_total * rows_total), 7 + span);
  const auto cols = static_cast<std::uint64_t>(cols_total), rows = static_cast<std::uint64_t>(rows_total);
  const auto bc = static_cast<std::uint32_t>(box_cols), br = static_cast<std::uint32_t>(box_rows);
  const std::size_t dump = static_cast<std::size_t>(box_cols * box_rows) * 2;
  c.maps[0] = {Buffer::a, 0, spec(2, {cols, rows}, {cols * 2}, {bc, br}, encoding(span))};
  c.maps[1] = {Buffer::out, 0, spec(2, {bc, br}, {std::uint64_t(bc) * 2}, {bc, br}, 0)};
  c.maps[2] = {Buffer::out, dump, spec(2, {cols, rows}, {cols * 2}, {bc, br}, encoding(span))};
  c.params.probe = Probe::tma_box;
  c.params.tx_bytes = static_cast<unsigned>(dump);
  c.params.c0 = c0;
  c.params.c1 = c1;
  c.out_bytes = dump + static_cast<std::size_t>(cols * rows) * 2;
  c.expected.assign(c.out_bytes, 0xff);
  for (int r = 0; r < box_rows; ++r) {
    for (int k = 0; k < box_cols; ++k) {
      const int gr = c1 + r, gc = c0 + k;
      const bool inside = gr < rows_total && gc < cols_total;
      const std::uint16_t v = inside ? c.a[static_cast<std::size_t>(gr * cols_total + gc)] : std::uint16_t{0};
      const auto logical = static_cast<std::uint32_t>((r * box_cols + k) * 2);
      const std::uint32_t physical = simt::sm90_layout::swizzle_address(logical, encoding(span));
      std::memcpy(c.expected.data() + physical, &v, 2);
      if (inside) std::memcpy(c.expected.data() + dump + static_cast<std::size_t>(gr * cols_total + gc) * 2, &v, 2);
    }
  }
  return c;
}

inline ProbeCase stmatrix_case() {
  ProbeCase c;
  c.name = "stmatrix";
  const std::vector<std::uint16_t> values = random_values(32 * 8, 31);
  c.a_frag.resize(32 * 4);
  for (std::size_t i = 0; i < c.a_frag.size(); ++i)
    c.a_frag[i] = values[2 * i] | (std::uint32_t{values[2 * i + 1]} << 16);
  c.maps[1] = {Buffer::out, 0, spec(2, {8, 64}, {16}, {8, 64}, 0)};
  c.params.probe = Probe::stmatrix;
  c.out_bytes = 1024;
  c.expected.assign(c.out_bytes, 0);
  const auto value_of = [&](int lane, int matrix, int half) {
    return values[static_cast<std::size_t>((lane * 4 + matrix) * 2 + half)];
  };
  for (int matrix = 0; matrix < 4; ++matrix) {
    for (int row = 0; row < 8; ++row) {
      for (int col = 0; col < 8; ++col) {
        // Plain: lane 4 row + col / 2 holds (row, col); .trans: lane 4 col + row / 2 holds (row, col).
        const std::uint16_t plain = value_of(row * 4 + col / 2, matrix, col % 2);
        const std::uint16_t trans = value_of(col * 4 + row / 2, matrix, row % 2);
        const std::size_t at = static_cast<std::size_t>(matrix * 128 + row * 16 + col * 2);
        std::memcpy(c.expected.data() + at, &plain, 2);
        std::memcpy(c.expected.data() + 512 + at, &trans, 2);
      }
    }
  }
  return c;
}

inline ProbeCase pingpong_case() {
  ProbeCase c;
  c.name = "mbarrier_pingpong";
  c.threads = 256;
  c.params.probe = Probe::pingpong;
  c.params.rounds = 5;
  c.out_bytes = 2 * 5 * 4;
  c.expected.assign(c.out_bytes, 0);
  for (int i = 0; i < 10; ++i) put_u32(c.expected, static_cast<std::size_t>(i), static_cast<std::uint32_t>(i));
  return c;
}

}  // namespace cases

// Every probe that must run clean, in a fixed order (the golden file's).
inline std::vector<ProbeCase> probe_cases() {
  std::vector<ProbeCase> all;
  for (const unsigned span : {0u, 32u, 64u, 128u}) {
    all.push_back(cases::wgmma_case(span, false, false));
    all.push_back(cases::wgmma_case(span, true, false));
  }
  all.push_back(cases::wgmma_case(128, false, true));
  all.push_back(cases::wgmma_case(0, true, true));
  for (const unsigned span : {0u, 32u, 64u, 128u}) all.push_back(cases::wgmma_fp8_case(span, false));
  all.push_back(cases::wgmma_fp8_case(128, true));
  all.push_back(cases::wgmma_fp8_case(0, true));
  all.push_back(cases::tma_box_case(0, 24, 20, 16, 16, 16, 8));
  all.push_back(cases::tma_box_case(128, 72, 10, 64, 8, 64, 4));
  all.push_back(cases::stmatrix_case());
  all.push_back(cases::pingpong_case());
  return all;
}

inline const ProbeCase& probe_case(const std::vector<ProbeCase>& all, const std::string& name) {
  for (const ProbeCase& c : all) {
    if (c.name == name) return c;
  }
  std::fprintf(stderr, "no probe named %s\n", name.c_str());
  std::abort();
}

// One line of golden data: the name, then the output as 32-bit words in hex.
inline std::string golden_line(const std::string& name, const std::vector<unsigned char>& out) {
  std::string line = name;
  char word[10];
  for (std::size_t i = 0; i + 4 <= out.size(); i += 4) {
    std::uint32_t v = 0;
    std::memcpy(&v, out.data() + i, 4);
    std::snprintf(word, sizeof word, " %08x", v);
    line += word;
  }
  return line;
}

}  // namespace mla::sm90_probes
