// Head dimensions of an MLA model's prefill attention.
#pragma once

#include <ostream>
#include <string>

namespace mla {

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

}  // namespace mla
