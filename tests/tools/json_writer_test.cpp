// The command's hand-written JSON: escaping and structure.
#include <gtest/gtest.h>

#include <sstream>

#include "json_writer.hpp"

namespace mla::tools {
namespace {

TEST(JsonQuote, EscapesWhatJsonRequires) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a \"quoted\" \\path\\"), R"("a \"quoted\" \\path\\")");
  EXPECT_EQ(json_quote("line\nnext\ttab\rret\b\f"), R"("line\nnext\ttab\rret\b\f")");
  EXPECT_EQ(json_quote(std::string("nul\0bell\x07 del\x7f", 14)), R"("nul\u0000bell\u0007 del\u007f")");
  EXPECT_EQ(json_quote(""), "\"\"");
}

TEST(JsonQuote, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(json_quote("gfx90a \xc2\xb5s \xe2\x86\x92 \xf0\x9f\x9a\x80"),
            "\"gfx90a \xc2\xb5s \xe2\x86\x92 \xf0\x9f\x9a\x80\"");
  EXPECT_EQ(json_quote("bad \xff byte"), R"("bad \ufffd byte")");
  EXPECT_EQ(json_quote("cut \xe2\x86"), R"("cut \ufffd\ufffd")");
  EXPECT_EQ(json_quote("overlong \xc0\xaf"), R"("overlong \ufffd\ufffd")");
  EXPECT_EQ(json_quote("surrogate \xed\xa0\x80"), R"("surrogate \ufffd\ufffd\ufffd")");
}

TEST(JsonWriter, NestsWithCommasAndIndentation) {
  std::ostringstream out;
  JsonWriter json(out);
  json.begin_object();
  json.key("name").value("REFERENCE");
  json.key("valid").value(true);
  json.key("priority").value(2);
  json.key("none").null();
  json.key("reasons").begin_array().value("a").value("b").end_array();
  json.key("empty").begin_array().end_array();
  json.key("inner").begin_object().key("n").value(std::int64_t{-5}).end_object();
  json.end_object();
  EXPECT_EQ(out.str(),
            "{\n"
            "  \"name\": \"REFERENCE\",\n"
            "  \"valid\": true,\n"
            "  \"priority\": 2,\n"
            "  \"none\": null,\n"
            "  \"reasons\": [\n"
            "    \"a\",\n"
            "    \"b\"\n"
            "  ],\n"
            "  \"empty\": [],\n"
            "  \"inner\": {\n"
            "    \"n\": -5\n"
            "  }\n"
            "}\n");
}

}  // namespace
}  // namespace mla::tools
