// AMD gfx names -> capability (docs/contract.md §11). The runtime reports names like
// "gfx90a:sramecc+:xnack-"; only the part before the first ':' names the chip.
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "mla/queue.hpp"

namespace mla {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

}  // namespace

std::string strip_amd_features(std::string_view gcn_arch_name) {
  std::string_view name = trim(gcn_arch_name);
  name = name.substr(0, name.find(':'));
  std::string lowered(name);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lowered;
}

std::optional<std::pair<int, int>> amd_arch_capability(std::string_view arch) {
  const std::string name = strip_amd_features(arch);
  if (name.size() < 5 || name.compare(0, 3, "gfx") != 0) return std::nullopt;
  const std::string_view digits = std::string_view(name).substr(3);

  // The last character is the stepping and may be a hex letter (gfx90a,
  // gfx90c); every character before it is a decimal digit.
  if (digits.size() > 4 || !is_hex_digit(digits.back())) return std::nullopt;
  for (std::size_t i = 0; i + 1 < digits.size(); ++i) {
    if (!is_digit(digits[i])) return std::nullopt;
  }
  // gfxABC (and gfxAB): major A, minor B. gfxABCD: major AB, minor C.
  if (digits.size() == 4) {
    return std::pair{(digits[0] - '0') * 10 + (digits[1] - '0'), digits[2] - '0'};
  }
  if (!is_digit(digits[1])) return std::nullopt;  // gfxAB with a hex letter as minor
  return std::pair{digits[0] - '0', digits[1] - '0'};
}

}  // namespace mla
