// YAML text -> neutral configuration tree. The only file of the library that
// includes yaml-cpp, so the parser can change without touching anything else.
#include <set>

#include <yaml-cpp/yaml.h>

#include "config_tree.hpp"
#include "mla/error.hpp"

namespace mla::detail {
namespace {

// yaml-cpp marks are 0-based; messages are 1-based like compilers'.
ConfigOrigin origin_of(const YAML::Mark& mark, const std::string& file_name) {
  if (mark.is_null()) return ConfigOrigin{file_name};
  return ConfigOrigin{file_name, mark.line + 1, mark.column + 1};
}

ConfigNode convert(const YAML::Node& node, const std::string& file_name) {
  ConfigNode out;
  out.origin = origin_of(node.Mark(), file_name);
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out.kind = ConfigNode::Kind::null;
      break;
    case YAML::NodeType::Scalar:
      out.kind = ConfigNode::Kind::scalar;
      out.scalar = node.Scalar();
      break;
    case YAML::NodeType::Sequence:
      out.kind = ConfigNode::Kind::sequence;
      for (const YAML::Node& item : node) out.items.push_back(convert(item, file_name));
      break;
    case YAML::NodeType::Map: {
      out.kind = ConfigNode::Kind::map;
      std::set<std::string> seen;
      for (const auto& pair : node) {
        const ConfigOrigin key_origin = origin_of(pair.first.Mark(), file_name);
        if (!pair.first.IsScalar()) config_error(key_origin, "keys must be scalars");
        const std::string& key = pair.first.Scalar();
        // yaml-cpp keeps both entries of a repeated key; a config that says
        // two things at once is a mistake worth reporting.
        if (!seen.insert(key).second) config_error(key_origin, "duplicate key '" + key + "'");
        out.members.push_back(ConfigMember{key, key_origin, convert(pair.second, file_name)});
      }
      break;
    }
  }
  return out;
}

}  // namespace

ConfigNode parse_yaml_tree(const std::string& text, const std::string& file_name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    config_error(origin_of(error.mark, file_name), "YAML syntax error: " + error.msg);
  }
  ConfigNode tree = convert(root, file_name);
  if (tree.kind == ConfigNode::Kind::null) tree.origin = ConfigOrigin{file_name, 1, 1};
  return tree;
}

}  // namespace mla::detail
