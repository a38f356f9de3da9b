// The byte spans behind the overlap checks: strides of either sign, padding,
// empty views, and which pairs the check refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/overlap.hpp"
#include "mla/error.hpp"

namespace {

using mla::DType;
using mla::TensorView;
using mla::detail::byte_span;
using mla::detail::check_no_overlap;
using mla::detail::Operand;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

std::string message_of(const std::vector<Operand>& outputs, const std::vector<Operand>& inputs) {
  try {
    check_no_overlap("step", outputs, inputs);
  } catch (const mla::Error& e) {
    EXPECT_EQ(e.category(), mla::ErrorCategory::invalid_argument);
    return e.what();
  }
  return "no error";
}

TEST(ByteSpan, ContiguousViewCoversItsElements) {
  float storage[3 * 5 * 7];
  const TensorView v = TensorView::contiguous(storage, DType::float32, {3, 5, 7});
  EXPECT_EQ(byte_span(v).begin, address(storage));
  EXPECT_EQ(byte_span(v).end, address(storage + 3 * 5 * 7));
}

TEST(ByteSpan, PaddedStridesEndAtTheLastElementNotThePadding) {
  std::uint16_t storage[4 * 3 * 24];  // bf16 [4, 3, 24] of which the view takes 11 columns
  TensorView v = TensorView::contiguous(storage, DType::bfloat16, {4, 3, 24});
  v.shape[2] = 11;
  EXPECT_EQ(byte_span(v).begin, address(storage));
  EXPECT_EQ(byte_span(v).end, address(storage + 3 * 72 + 2 * 24 + 10 + 1));
}

TEST(ByteSpan, NegativeAndTransposedStrides) {
  float storage[6 * 4];
  TensorView v = TensorView::contiguous(storage + 5 * 4, DType::float32, {6, 4});
  v.stride = {-4, 1, 0, 0};  // rows from the last one backwards
  EXPECT_EQ(byte_span(v).begin, address(storage));
  EXPECT_EQ(byte_span(v).end, address(storage + 24));
  TensorView t = TensorView::contiguous(storage, DType::float32, {4, 6});
  t.stride = {1, 4, 0, 0};  // the transpose
  EXPECT_EQ(byte_span(t).begin, address(storage));
  EXPECT_EQ(byte_span(t).end, address(storage + 24));
}

TEST(ByteSpan, EmptyViewsCoverNothing) {
  float storage[8];
  EXPECT_TRUE(byte_span(TensorView{}).empty());
  EXPECT_TRUE(byte_span(TensorView::contiguous(storage, DType::float32, {0, 8})).empty());
  EXPECT_TRUE(byte_span(TensorView::contiguous(nullptr, DType::float32, {0, 8})).empty());
  EXPECT_TRUE(byte_span(storage, 0).empty());
  EXPECT_TRUE(byte_span(nullptr, 64).empty());
  EXPECT_FALSE(byte_span(storage, 1).empty());
}

TEST(Overlap, OutputsMustNotTouchInputsOrEachOther) {
  float storage[64];
  const TensorView q = TensorView::contiguous(storage, DType::float32, {4, 8});
  const TensorView rest = TensorView::contiguous(storage + 32, DType::float32, {4, 8});
  const TensorView tail = TensorView::contiguous(storage + 31, DType::float32, {2});
  EXPECT_EQ(message_of({{"out", rest}}, {{"q", q}}), "no error");            // adjacent is fine
  EXPECT_EQ(message_of({{"out", rest}}, {{"q", q}, {"k", q}}), "no error");  // inputs may share
  const std::string message = message_of({{"out", tail}}, {{"q", q}});
  EXPECT_NE(message.find("step: out overlaps q: an output must not share memory"), std::string::npos) << message;
  EXPECT_NE(message.find("float32[2] strides [1]"), std::string::npos) << message;
  EXPECT_NE(message.find("float32[4, 8] strides [8, 1]"), std::string::npos) << message;
  EXPECT_NE(message_of({{"out", rest}, {"lse", tail}}, {}).find("out overlaps lse"), std::string::npos);
  EXPECT_NE(message_of({{"workspace", storage + 7, 4}}, {{"q", q}}).find("workspace overlaps q"), std::string::npos);
  EXPECT_EQ(message_of({{"workspace", storage + 32, 128}}, {{"q", q}}), "no error");
  EXPECT_EQ(message_of({{"out", std::optional<TensorView>{}}}, {{"q", q}}), "no error");
}

// Two column slices of one buffer never share an element, but their spans
// cross: the check refuses them rather than reason about strides.
TEST(Overlap, InterleavedSpansAreRefused) {
  float storage[4 * 16];
  TensorView left = TensorView::contiguous(storage, DType::float32, {4, 8});
  left.stride = {16, 1, 0, 0};
  TensorView right = left;
  right.data = storage + 8;
  EXPECT_NE(message_of({{"out", right}}, {{"q", left}}).find("out overlaps q"), std::string::npos);
}

}  // namespace
