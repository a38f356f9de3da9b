// The short way from a model's parameters to a backend on its queue: the
// same calls a program makes one by one (configuration, selection, queue,
// creation), for the first program and the simple ones.
#include <utility>

#include "mla/platform.hpp"

namespace mla {

ChosenBackend choose_backend(const BackendParams& params) {
  const Config config = resolve_config();
  configure(config);
  Selector selector(config);
  Selection selection = selector.select({params.dtype, params.dims}, current_platform());
  Queue queue = make_queue(selection);
  std::unique_ptr<PrefillBackend> backend = selector.create(selection, params);
  return {std::move(selection), std::move(queue), std::move(backend)};
}

}  // namespace mla
