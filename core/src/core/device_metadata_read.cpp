// read_device_metadata: the default way a backend takes metadata that lives
// on the device, by copying its arrays back through the queue.
#include <fmt/format.h>

#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

std::vector<std::int32_t> read_array(Queue& queue, const std::int32_t* source, int batch_size) {
  std::vector<std::int32_t> values(static_cast<std::size_t>(batch_size) + 1);
  queue.memcpy(values.data(), source, values.size() * sizeof(std::int32_t));
  return values;
}

void check_total(const std::vector<std::int32_t>& cu, std::int64_t expected, const std::string& what,
                 const char* size_name) {
  if (cu.back() != expected) {
    raise(ErrorCategory::invalid_argument,
          fmt::format("device metadata: {} ends at {} but {} is {}", what, cu.back(), size_name, expected));
  }
}

}  // namespace

PrefillMetadata read_device_metadata(Queue& queue, const DevicePrefillMetadata& metadata) {
  check_device_metadata(metadata);
  PrefillMetadata host;
  host.cu_seqlens_q = read_array(queue, metadata.cu_seqlens_q, metadata.batch_size);
  host.cu_seqlens_k = read_array(queue, metadata.cu_seqlens_k, metadata.batch_size);
  host.max_seqlen_q = metadata.max_seqlen_q;
  host.max_seqlen_k = metadata.max_seqlen_k;
  host.causal = metadata.causal;
  for (const DevicePrefillMetadata::Chunk& chunk : metadata.chunks) {
    PrefillMetadata::Chunk c;
    c.cu_seqlens_k = read_array(queue, chunk.cu_seqlens_k, metadata.batch_size);
    c.max_seqlen_k = chunk.max_seqlen_k;
    host.chunks.push_back(std::move(c));
  }
  queue.wait();
  check_metadata(host);
  check_total(host.cu_seqlens_q, metadata.num_q_tokens, "cu_seqlens_q", "num_q_tokens");
  check_total(host.cu_seqlens_k, metadata.num_k_tokens, "cu_seqlens_k", "num_k_tokens");
  for (std::size_t c = 0; c < host.chunks.size(); ++c) {
    check_total(host.chunks[c].cu_seqlens_k, metadata.chunks[c].num_k_tokens,
                fmt::format("context chunk {} cu_seqlens_k", c), "its num_k_tokens");
  }
  return host;
}

}  // namespace mla
