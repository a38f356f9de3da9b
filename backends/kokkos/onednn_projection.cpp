// The MLA step's up-projection on oneDNN's matmul; see onednn_projection.hpp.
//
// Work is split the backend's way, not oneDNN's: work items of (head, up to 8
// blocks of onednn_block_tokens tokens), spread over the Kokkos threads by
// for_each_item, and each block runs one single-threaded oneDNN GEMM (the
// head's keys and values) of one fixed shape, on weights packed once per
// item. So oneDNN never starts threads of its own beside the backend's, and a
// token's keys are the same bits whatever the thread count or the tokens
// around it: a oneDNN GEMM sums over the latent index in an order fixed by
// its shape (K blocking, and a parallel K split only when it has several
// threads), and with one shape on one thread every row is computed alike
// (tests/kokkos/projection_test.cpp checks it). Letting oneDNN thread one big
// GEMM instead would choose its split from the token count and the thread
// count, and oneDNN's GEMM into strided rows (the key and value views) gives a
// token alone other bits than the same token among others
// (mla-bench-cpu-projection shows both).
#include "onednn_projection.hpp"

#include <oneapi/dnnl/dnnl.hpp>
#if MLA_ONEDNN_OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "host_parallel.hpp"
#include "mla/detail/numeric.hpp"

namespace mla::kokkos {
namespace {

using dnnl::memory;

// oneDNN (Debian's is built for OpenMP) sizes its parallel regions by the
// calling thread's OpenMP thread count: set to one while oneDNN plans or
// runs on this thread, then restored, so the application's own OpenMP
// setting is left as it was. Inside an OpenMP Kokkos region oneDNN would run
// on one thread anyway; on the Serial or Threads space, or on the thread that
// creates the GEMMs, it would otherwise start a team of its own.
class OneDnnOnThisThreadOnly {
 public:
#if MLA_ONEDNN_OPENMP
  OneDnnOnThisThreadOnly() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneDnnOnThisThreadOnly() { omp_set_num_threads(saved_); }
  OneDnnOnThisThreadOnly(const OneDnnOnThisThreadOnly&) = delete;
  OneDnnOnThisThreadOnly& operator=(const OneDnnOnThisThreadOnly&) = delete;

 private:
  int saved_;
#endif
};

// A thread's growing buffer, reused by its later items and calls.
class ThreadBuffer {
 public:
  std::byte* at_least(std::size_t bytes) {
    if (bytes > size_) {
      data_.reset(new std::byte[bytes]);
      size_ = bytes;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_ = 0;
};

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  // Each thread brings its own scratch: no state shared between items.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// One GEMM shape: [block tokens, depth] latents times a [depth, n] slice of
// kv_b_proj^T into a contiguous [block tokens, n] block. The weights are in
// oneDNN's own layout (packed by `Pack` once for several blocks): the GEMM
// would otherwise repack its slice on every call, which costs bf16 about 9%.
struct Gemm {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul primitive;
  std::size_t scratch_bytes = 0;

  Gemm(memory::data_type type, std::int64_t depth, std::int64_t n) {
    const memory::desc a({onednn_block_tokens, depth}, type, memory::dims{depth, 1});
    const memory::desc b({depth, n}, type, memory::format_tag::any);
    const memory::desc c({onednn_block_tokens, n}, type, memory::dims{n, 1});
    desc = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), user_scratchpad(), cpu_engine());
    primitive = dnnl::matmul(desc);
    scratch_bytes = desc.scratchpad_desc().get_size();
  }

  void run(const void* a, const void* packed_b, void* c, void* scratch) const {
    const dnnl::engine& engine = cpu_engine();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(desc.src_desc(), engine, const_cast<void*>(a))},
        {DNNL_ARG_WEIGHTS, memory(desc.weights_desc(), engine, const_cast<void*>(packed_b))},
        {DNNL_ARG_DST, memory(desc.dst_desc(), engine, c)}};
    if (scratch_bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(desc.scratchpad_desc(), engine, scratch));
    primitive.execute(thread_stream(), args);
    thread_stream().wait();
  }
};

// Copies a [depth, n] slice of kv_b_proj^T (a row of kv_b_proj every ldw
// elements) into the GEMM's weight layout: data movement only, no rounding.
struct Pack {
  dnnl::reorder::primitive_desc desc;
  dnnl::reorder primitive;
  std::size_t bytes = 0, scratch_bytes = 0;

  Pack(const Gemm& gemm, memory::data_type type, std::int64_t depth, std::int64_t ldw, std::int64_t n) {
    const memory::desc plain({depth, n}, type, memory::dims{1, ldw});
    desc =
        dnnl::reorder::primitive_desc(cpu_engine(), plain, cpu_engine(), gemm.desc.weights_desc(), user_scratchpad());
    primitive = dnnl::reorder(desc);
    bytes = gemm.desc.weights_desc().get_size();
    scratch_bytes = desc.scratchpad_desc().get_size();
  }

  void run(const void* plain, void* packed, void* scratch) const {
    const dnnl::engine& engine = cpu_engine();
    std::unordered_map<int, memory> args{{DNNL_ARG_FROM, memory(desc.src_desc(), engine, const_cast<void*>(plain))},
                                         {DNNL_ARG_TO, memory(desc.dst_desc(), engine, packed)}};
    if (scratch_bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(desc.scratchpad_desc(), engine, scratch));
    primitive.execute(thread_stream(), args);
    thread_stream().wait();
  }
};

// dst[i] = src[i * stride] for i < count, converted from src_type to
// dst_type (float32 or bfloat16, rounded to nearest even).
void convert_row(const void* src, DType src_type, std::int64_t stride, std::int64_t count, void* dst, DType dst_type) {
  if (src_type == dst_type && stride == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(count) * dtype_size(dst_type));
  } else if (src_type == DType::float32 && dst_type == DType::float32) {
    const auto* from = static_cast<const float*>(src);
    auto* to = static_cast<float*>(dst);
    for (std::int64_t i = 0; i < count; ++i) to[i] = from[i * stride];
  } else if (src_type == DType::float32 && dst_type == DType::bfloat16) {
    const auto* from = static_cast<const float*>(src);
    auto* to = static_cast<std::uint16_t*>(dst);
    for (std::int64_t i = 0; i < count; ++i) to[i] = numeric::float_to_bf16(from[i * stride]);
  } else if (src_type == dst_type) {
    const auto* from = static_cast<const std::uint16_t*>(src);  // bfloat16 to bfloat16
    auto* to = static_cast<std::uint16_t*>(dst);
    for (std::int64_t i = 0; i < count; ++i) to[i] = from[i * stride];
  } else {
    for (std::int64_t i = 0; i < count; ++i)
      store_from_float(dst, dst_type, i, load_as_float(src, src_type, i * stride));
  }
}

// Rows [first, first + count) of a [rows, depth] view as contiguous rows of `type` at `dst`.
void convert_rows(const TensorView& x, std::int64_t first, std::int64_t count, std::byte* dst, DType type) {
  const std::int64_t depth = x.size(1);
  const std::size_t row_bytes = static_cast<std::size_t>(depth) * dtype_size(type);
  const std::size_t in_element = dtype_size(x.dtype);
  for (std::int64_t r = 0; r < count; ++r) {
    const auto* src =
        static_cast<const std::byte*>(x.data) + static_cast<std::size_t>(x.offset(first + r, 0)) * in_element;
    convert_row(src, x.dtype, x.stride[1], depth, dst + static_cast<std::size_t>(r) * row_bytes, type);
  }
}

}  // namespace

std::string project_latents_onednn(const TensorView& latents, const TensorView& w, const TensorView& k,
                                   const TensorView& v) {
  if (k.dtype != DType::float32 && k.dtype != DType::bfloat16) {
    return std::string(dtype_name(k.dtype)) + " keys (oneDNN serves float32 and bfloat16)";
  }
  const DType type = k.dtype;
  const std::int64_t tokens = latents.size(0), depth = latents.size(1), heads = k.size(1);
  const std::int64_t per_head = w.size(0) / heads, p = per_head - v.size(2), v_dim = v.size(2);
  if (k.stride[2] != 1 || v.stride[2] != 1) {
    return "keys or values whose rows are not contiguous";
  }
  const std::size_t element = dtype_size(type);
  const memory::data_type onednn_type = type == DType::float32 ? memory::data_type::f32 : memory::data_type::bf16;

  // The calling thread keeps this call's buffers for its next calls: fresh
  // ones would cost their page faults again each call (about 5% at 1k tokens).
  thread_local ThreadBuffer converted_w, rows_buffer;
  // kv_b_proj as it is when it already has the GEMM's dtype and unit stride
  // along the latent index; else a converted copy, [H*(P+V), L].
  const void* weights = w.data;
  std::int64_t ldw = w.stride[0];
  std::byte* converted = nullptr;
  if (w.dtype != type || w.stride[1] != 1) {
    converted = converted_w.at_least(static_cast<std::size_t>(w.size(0) * depth) * element);
    weights = converted;
    ldw = depth;
  }
  // The latents as contiguous rows of the GEMM's dtype, padded with zero rows
  // to whole blocks.
  const std::int64_t blocks = (tokens + onednn_block_tokens - 1) / onednn_block_tokens;
  std::byte* const rows =
      rows_buffer.at_least(static_cast<std::size_t>(blocks * onednn_block_tokens * depth) * element);
  const std::int64_t weight_rows_per_item = (w.size(0) + blocks - 1) / blocks;
  for_each_item("mla_kokkos_project_latents_convert", blocks, [&](std::int64_t block) {
    const std::int64_t t0 = block * onednn_block_tokens;
    const std::int64_t valid = std::min(onednn_block_tokens, tokens - t0);
    std::byte* block_rows = rows + static_cast<std::size_t>(t0 * depth) * element;
    convert_rows(latents, t0, valid, block_rows, type);
    std::memset(block_rows + static_cast<std::size_t>(valid * depth) * element, 0,
                static_cast<std::size_t>((onednn_block_tokens - valid) * depth) * element);
    if (converted == nullptr) return;
    const std::int64_t c0 = std::min(w.size(0), block * weight_rows_per_item);
    convert_rows(w, c0, std::min(weight_rows_per_item, w.size(0) - c0),
                 converted + static_cast<std::size_t>(c0 * depth) * element, type);
  });

  // One GEMM per item: the head's keys and values as one contiguous
  // [block tokens, P+V] block in the thread's scratch, whose valid rows are
  // then copied into k and v. Writing into k's and v's strided rows directly
  // takes oneDNN 2.6's kernel for strided results instead of its brgemm one:
  // 5-6% slower on one core at DeepSeek dims with the copy counted, and the
  // last, partial block would need a scratch with k's strides to get the same
  // kernel (and bits) as the full blocks.
  std::optional<Gemm> gemm;
  std::optional<Pack> pack;
  try {
    const OneDnnOnThisThreadOnly one_thread;
    gemm.emplace(onednn_type, depth, per_head);
    pack.emplace(*gemm, onednn_type, depth, ldw, per_head);
  } catch (const dnnl::error& error) {
    return std::string("oneDNN has no ") + std::string(dtype_name(type)) + " matmul here: " + error.what();
  }
  const std::size_t block_bytes = static_cast<std::size_t>(onednn_block_tokens * per_head) * element;

  std::atomic<bool> failed{false};
  std::string failure;
  // Items of up to kBlocksPerItem blocks of one head: the item packs the
  // head's weights once into its thread's scratch (which stays in L2 while
  // its blocks use it), and there are still enough items to keep every
  // thread busy at a few thousand tokens.
  constexpr std::int64_t kBlocksPerItem = 8;
  const std::int64_t chunks = (blocks + kBlocksPerItem - 1) / kBlocksPerItem;
  for_each_item("mla_kokkos_project_latents_onednn", heads * chunks, [&](std::int64_t item) {
    if (failed.load(std::memory_order_relaxed)) return;
    try {
      const OneDnnOnThisThreadOnly one_thread;
      const std::int64_t head = item / chunks, first_block = item % chunks * kBlocksPerItem;
      thread_local ThreadBuffer packed, out_block, scratch;
      std::byte* const head_weights = packed.at_least(pack->bytes);
      std::byte* const gemm_scratch = scratch.at_least(std::max(pack->scratch_bytes, gemm->scratch_bytes));
      pack->run(static_cast<const std::byte*>(weights) + static_cast<std::size_t>(head * per_head * ldw) * element,
                head_weights, gemm_scratch);
      std::byte* const out = out_block.at_least(block_bytes);
      for (std::int64_t block = first_block; block < std::min(blocks, first_block + kBlocksPerItem); ++block) {
        const std::int64_t t0 = block * onednn_block_tokens;
        const std::int64_t valid = std::min(onednn_block_tokens, tokens - t0);
        gemm->run(rows + static_cast<std::size_t>(t0 * depth) * element, head_weights, out, gemm_scratch);
        // Columns [from, from + n) of each valid row into dst[t0 + r, head, :n].
        const auto copy_rows = [&](const TensorView& dst, std::int64_t from, std::int64_t n) {
          auto* to = static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(dst.offset(t0, head, 0)) * element;
          for (std::int64_t r = 0; r < valid; ++r) {
            std::memcpy(to + static_cast<std::size_t>(r * dst.stride[0]) * element,
                        out + static_cast<std::size_t>(r * per_head + from) * element,
                        static_cast<std::size_t>(n) * element);
          }
        };
        copy_rows(k, 0, p);
        copy_rows(v, p, v_dim);
      }
    } catch (const std::exception& error) {
      if (!failed.exchange(true)) failure = error.what();
    }
  });
  if (failed.load()) return std::string("oneDNN failed: ") + failure;
  return "";
}

}  // namespace mla::kokkos
