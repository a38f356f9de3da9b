// Which queue a backend runs on: the description's queue_kinds are the one
// place that says so; the command, the tests and every backend's own check
// read them through these functions.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

// "host", "cuda or hip"
std::string kinds_text(const std::vector<DeviceBackend>& kinds) {
  std::string text;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) text += i + 1 == kinds.size() ? " or " : ", ";
    text += device_backend_name(kinds[i]);
  }
  return text;
}

bool accepts(const std::vector<DeviceBackend>& kinds, DeviceBackend kind) {
  if (kinds.empty()) return true;
  for (DeviceBackend k : kinds)
    if (k == kind) return true;
  return false;
}

}  // namespace

Queue make_queue(const BackendDescription& description, int device_index) {
  if (description.queue_kinds.empty()) return Queue::default_queue();
  for (DeviceBackend kind : description.queue_kinds) {
    if (!device_backend_built(kind)) continue;
    if (kind == DeviceBackend::host) return Queue::host();
    return Queue(kind, device_index);
  }
  raise(
      ErrorCategory::not_supported,
      fmt::format("{} runs on a {} queue, and this build of mlaprefill has none (use the {} preset)", description.name,
                  kinds_text(description.queue_kinds), device_backend_name(description.queue_kinds.front())));
}

void check_queue(const BackendDescription& description, const Queue& queue) {
  if (accepts(description.queue_kinds, queue.backend())) return;
  raise(ErrorCategory::not_supported,
        fmt::format("{} runs on a {} queue, not on a {} queue ({}); mla::make_queue(selection) creates one that fits",
                    description.name, kinds_text(description.queue_kinds), device_backend_name(queue.backend()),
                    queue.describe()));
}

void require_queue_kind(std::string_view who, std::string_view operation, const std::vector<DeviceBackend>& kinds,
                        const Queue& queue) {
  if (accepts(kinds, queue.backend())) return;
  raise(ErrorCategory::not_supported,
        fmt::format("{} {} needs a {} queue; got a {} queue ({})", who, operation, kinds_text(kinds),
                    device_backend_name(queue.backend()), queue.describe()));
}

}  // namespace mla
