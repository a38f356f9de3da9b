#include "mla/tensor.hpp"

#include <fmt/format.h>

namespace mla {

std::string to_string(const MlaDims& dims) {
  return fmt::format("(qk_nope_head_dim={}, qk_rope_head_dim={}, v_head_dim={})", dims.qk_nope_head_dim,
                     dims.qk_rope_head_dim, dims.v_head_dim);
}

std::ostream& operator<<(std::ostream& os, const MlaDims& dims) { return os << to_string(dims); }

}  // namespace mla
