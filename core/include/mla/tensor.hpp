// The vocabulary of data: element types, an MLA model's head dimensions and
// non-owning views of strided tensors of up to four dimensions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>

namespace mla {

enum class DType { float32, float16, bfloat16, float8_e4m3 };

// "float32", "float16", "bfloat16", "float8_e4m3" (the names vLLM prints).
std::string_view dtype_name(DType dtype);

// Accepts the names above and the short forms fp32, fp16, bf16, fp8, fp8_e4m3,
// float, half. Unknown names raise Error(invalid_argument) listing the valid ones.
DType parse_dtype(std::string_view name);

std::size_t dtype_size(DType dtype);

// The value `value` takes after a round trip through `dtype` (identity for float32).
float round_to_dtype(float value, DType dtype);

// Reads element `index` of a buffer of `dtype` as float.
float load_as_float(const void* data, DType dtype, std::int64_t index);
// Writes `value` converted to `dtype` into element `index`.
void store_from_float(void* data, DType dtype, std::int64_t index, float value);

// How the MLA step's paged latent cache stores one token (docs/contract.md
// §13): `plain` is L + R values of the cache's dtype; the grouped formats
// are byte records (a float8_e4m3 tensor [blocks, block_size, bytes] with
// unit last stride) whose e4m3 values carry a scale per group.
enum class CacheFormat {
  plain,
  // DeepSeek-V3.2 (FlashMLA's "FP8 with scale"), 656 bytes: L = 512 e4m3
  // latents, 4 float32 scales (one per 128 latents), R = 64 bfloat16 rope
  // values.
  fp8_ds_mla,
  // DeepSeek-V4.1 (MXFP8), 528 bytes: L + R = 512 e4m3 values (latents,
  // then rope), 16 ue8m0 scales (2^(byte - 127), one per 32 values).
  mxfp8_ds_mla,
};

// "plain", "fp8_ds_mla", "mxfp8_ds_mla".
std::string_view cache_format_name(CacheFormat format);

// Bytes per token of a grouped format (656, 528); 0 for plain, whose width
// is L + R elements.
std::int64_t cache_record_bytes(CacheFormat format);

// Why `format` cannot hold latents of width `latent` and rope keys of width
// `rope` (e.g. "fp8_ds_mla holds 512 latents and 64 rope values; got 448
// and 64"); empty when it can. Plain holds any.
std::string cache_format_refusal(CacheFormat format, std::int64_t latent, std::int64_t rope);

// Head dimensions of an MLA model's prefill attention.
struct MlaDims {
  int qk_nope_head_dim = 128;  // P
  int qk_rope_head_dim = 64;   // R
  int v_head_dim = 128;        // V

  // Width of a query or key row: P + R.
  constexpr int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }

  friend constexpr bool operator==(const MlaDims&, const MlaDims&) = default;
};

// "(qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)"
std::string to_string(const MlaDims& dims);
std::ostream& operator<<(std::ostream& os, const MlaDims& dims);

// DeepSeek-V2/V3/R1.
inline constexpr MlaDims deepseek_dims{128, 64, 128};

// Where a pointer's memory lives, in USM terms.
enum class MemoryKind {
  host,    // ordinary host memory, or memory from Queue::malloc_host
  device,  // memory from Queue::malloc_device (on a host queue this is host memory too)
  shared,  // memory from Queue::malloc_shared, visible to host and device
};

std::string_view memory_kind_name(MemoryKind kind);

struct TensorView {
  static constexpr int max_rank = 4;

  void* data = nullptr;
  DType dtype = DType::float32;
  int rank = 0;
  std::array<std::int64_t, max_rank> shape{};
  std::array<std::int64_t, max_rank> stride{};  // in elements, not bytes
  MemoryKind memory = MemoryKind::host;

  // A row-major contiguous view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               MemoryKind memory = MemoryKind::host);

  bool empty_view() const { return data == nullptr && rank == 0; }
  std::int64_t numel() const;
  std::int64_t size(int dim) const { return shape.at(static_cast<std::size_t>(dim)); }
  bool is_contiguous() const;

  // Element offset of an index (no bounds check).
  std::int64_t offset(std::int64_t i0, std::int64_t i1 = 0, std::int64_t i2 = 0, std::int64_t i3 = 0) const {
    return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
  }

  // "bfloat16[7, 16, 192] strides [3072, 192, 1] on device"
  std::string describe() const;
};

}  // namespace mla
