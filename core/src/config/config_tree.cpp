// The neutral configuration tree's lookups and the type checks that turn a
// wrong shape into an error naming where it was written.
#include "config/config_tree.hpp"

#include "mla/error.hpp"

namespace mla::detail {

const ConfigNode* ConfigNode::find(std::string_view key) const {
  if (kind != Kind::map) return nullptr;
  for (const ConfigMember& member : members) {
    if (member.key == key) return &member.value;
  }
  return nullptr;
}

std::string_view kind_description(ConfigNode::Kind kind) {
  switch (kind) {
    case ConfigNode::Kind::null:
      return "an empty value";
    case ConfigNode::Kind::scalar:
      return "a scalar";
    case ConfigNode::Kind::sequence:
      return "a sequence";
    case ConfigNode::Kind::map:
      return "a map";
  }
  return "an unknown node";
}

void config_error(const ConfigOrigin& where, const std::string& message) {
  raise(ErrorCategory::config, where.describe() + ": " + message);
}

void expect_kind(const ConfigNode& node, ConfigNode::Kind kind, std::string_view what) {
  if (node.kind != kind) {
    config_error(node.origin, std::string(what) + " must be " + std::string(kind_description(kind)) + ", got " +
                                  std::string(kind_description(node.kind)));
  }
}

const std::string& expect_scalar(const ConfigNode& node, std::string_view what) {
  expect_kind(node, ConfigNode::Kind::scalar, what);
  return node.scalar;
}

void check_keys(const ConfigNode& node, std::initializer_list<std::string_view> valid, std::string_view where) {
  for (const ConfigMember& member : node.members) {
    bool known = false;
    for (std::string_view key : valid) known = known || key == member.key;
    if (known) continue;
    std::string list;
    for (std::string_view key : valid) list += (list.empty() ? "" : ", ") + std::string(key);
    config_error(member.key_origin,
                 "unknown key '" + member.key + "' in " + std::string(where) + ". Valid keys: " + list);
  }
}

}  // namespace mla::detail
