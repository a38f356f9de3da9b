// The short way from a model's parameters to a backend on its queue, with
// the configuration as it comes, for the first program and the simple ones.
#include "mla/platform.hpp"

namespace mla {

ChosenBackend choose_backend(const BackendParams& params) {
  const Config config = resolve_config();
  configure(config);
  Selector selector(config);
  return choose_backend(selector, params, current_platform());
}

}  // namespace mla
