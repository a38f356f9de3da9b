// Internal: a neutral tree of configuration values. YAML becomes this tree at
// the edge (yaml_loader.cpp, the only file that sees yaml-cpp); config.cpp reads
// only the tree. Every node remembers where it was written, so each error can
// name file:line:column.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "mla/config.hpp"

namespace mla::detail {

struct ConfigMember;

struct ConfigNode {
  enum class Kind { null, scalar, sequence, map };

  Kind kind = Kind::null;
  ConfigOrigin origin;
  std::string scalar;                 // Kind::scalar
  std::vector<ConfigNode> items;      // Kind::sequence
  std::vector<ConfigMember> members;  // Kind::map, in the order written

  // nullptr when this is not a map or has no such key.
  const ConfigNode* find(std::string_view key) const;
};

struct ConfigMember {
  std::string key;
  ConfigOrigin key_origin;
  ConfigNode value;
};

// "a map", "a sequence", "a scalar", "an empty value".
std::string_view kind_description(ConfigNode::Kind kind);

// Raises Error(config) prefixed with "file:line:column: ".
[[noreturn]] void config_error(const ConfigOrigin& where, const std::string& message);

// Type checks: raise Error(config) naming `what` ("'backend'") and the kind found.
void expect_kind(const ConfigNode& node, ConfigNode::Kind kind, std::string_view what);
const std::string& expect_scalar(const ConfigNode& node, std::string_view what);

// Raises Error(config) at the first key of map `node` not in `valid`, listing the valid keys.
void check_keys(const ConfigNode& node, std::initializer_list<std::string_view> valid, std::string_view where);

// YAML text -> tree (yaml_loader.cpp). Syntax errors raise Error(config) with
// file:line:column; duplicate keys are errors too. An empty document is a null node.
ConfigNode parse_yaml_tree(const std::string& text, const std::string& file_name);

}  // namespace mla::detail
