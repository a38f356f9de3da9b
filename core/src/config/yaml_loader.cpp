// YAML text -> neutral configuration tree. The only file of the library that
// includes yaml-cpp, so the parser can change without touching anything else.
#include <cstddef>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "config/config_tree.hpp"
#include "mla/error.hpp"

namespace mla::detail {
namespace {

// A configuration is a few dozen values, four levels deep. yaml-cpp shares
// the node an alias (*name) names, so without limits nine lines of aliases
// expand to a billion values ("billion laughs", out of memory), and an alias
// inside its own anchor (&a [*a]) to an endless tree (stack overflow).
constexpr int max_depth = 64;
constexpr std::size_t max_values = 10000;

// yaml-cpp marks are 0-based; messages are 1-based like compilers'.
ConfigOrigin origin_of(const YAML::Mark& mark, const std::string& file_name) {
  if (mark.is_null()) return ConfigOrigin{file_name};
  return ConfigOrigin{file_name, mark.line + 1, mark.column + 1};
}

// `values` counts the nodes converted so far, aliases once per use.
ConfigNode convert(const YAML::Node& node, const std::string& file_name, int depth, std::size_t& values) {
  ConfigNode out;
  out.origin = origin_of(node.Mark(), file_name);
  if (depth > max_depth) {
    config_error(out.origin, "values nested more than " + std::to_string(max_depth) +
                                 " levels deep (an alias inside its own anchor, like &a [*a], nests forever)");
  }
  if (++values > max_values) {
    config_error(out.origin, "more than " + std::to_string(max_values) +
                                 " values in one configuration (each use of an alias counts its values again)");
  }
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
      for (const YAML::Node& item : node) out.items.push_back(convert(item, file_name, depth + 1, values));
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
        out.members.push_back(ConfigMember{key, key_origin, convert(pair.second, file_name, depth + 1, values)});
      }
      break;
    }
  }
  return out;
}

// Where a second YAML document with content starts, if `text` has one. Read
// as parser events, at most two documents' worth: no tree is built for it,
// and yaml-cpp's LoadAll, which would build them all, can keep appending
// documents to some inputs until memory runs out.
std::optional<YAML::Mark> second_document(const std::string& text) {
  struct Finder final : YAML::EventHandler {
    YAML::Mark start;
    bool content = false;
    void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content = true; }
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {
      content = true;
    }
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      content = true;
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      content = true;
    }
    void OnMapEnd() override {}
  };
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  Finder first, second;
  if (!parser.HandleNextDocument(first) || !parser.HandleNextDocument(second) || !second.content) return std::nullopt;
  return second.start;
}

}  // namespace

ConfigNode parse_yaml_tree(const std::string& text, const std::string& file_name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
    // YAML::Load keeps the first document of a stream and drops the rest
    // without a word: a second one with content is refused.
    if (const std::optional<YAML::Mark> second = second_document(text)) {
      config_error(origin_of(*second, file_name),
                   "the file holds more than one YAML document (separated by ---); a configuration is one document");
    }
  } catch (const YAML::Exception& error) {
    config_error(origin_of(error.mark, file_name), "YAML syntax error: " + error.msg);
  }
  std::size_t values = 0;
  ConfigNode tree = convert(root, file_name, 0, values);
  if (tree.kind == ConfigNode::Kind::null) tree.origin = ConfigOrigin{file_name, 1, 1};
  return tree;
}

}  // namespace mla::detail
