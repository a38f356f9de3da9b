// A minimal JSON writer for the command's machine-readable output: objects,
// arrays, strings (escaped per RFC 8259), integers, booleans and null, with
// two-space indentation. It tracks commas; the caller nests calls correctly.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace mla::tools {

// `text` as a JSON string literal, quotes included. Control characters and
// bytes that are not valid UTF-8 are escaped (the latter as U+FFFD).
std::string json_quote(std::string_view text);

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // The key of the next value inside an object.
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
  JsonWriter& value(bool flag);
  JsonWriter& null();

 private:
  void before_value();
  void open(char bracket);
  void close(char bracket);

  std::ostream& out_;
  std::vector<bool> has_items_;  // one entry per open container
  bool after_key_ = false;
};

}  // namespace mla::tools
