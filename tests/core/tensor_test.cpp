#include <gtest/gtest.h>

#include <string>

#include "mla/backend/checks.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace {

using mla::DType;
using mla::TensorView;

TEST(TensorView, ContiguousStridesAndDescribe) {
  float storage[2 * 3 * 4];
  TensorView v = TensorView::contiguous(storage, DType::float32, {2, 3, 4});
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.stride[0], 12);
  EXPECT_EQ(v.stride[1], 4);
  EXPECT_EQ(v.stride[2], 1);
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.offset(1, 2, 3), 23);
  EXPECT_EQ(v.describe(), "float32[2, 3, 4] strides [12, 4, 1] on host");
}

TEST(TensorView, PaddedHeadStrideIsNotContiguous) {
  float storage[5 * 2 * 192];
  TensorView v = TensorView::contiguous(storage, DType::float32, {5, 2, 128});
  v.stride = {2 * 192, 192, 1, 0};
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.offset(1, 1, 0), 2 * 192 + 192);
}

TEST(TensorView, CheckTensorNamesWhatIsWrong) {
  float storage[2 * 3 * 4];
  TensorView v = TensorView::contiguous(storage, DType::float32, {2, 3, 4});
  EXPECT_NO_THROW(mla::check_tensor(v, "q", DType::float32, {-1, 3, 4}));
  auto message_of = [&](auto&& call) {
    try {
      call();
    } catch (const mla::Error& e) {
      EXPECT_EQ(e.category(), mla::ErrorCategory::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of([&] {
              mla::check_tensor(v, "q", DType::bfloat16, {2, 3, 4});
            }).find("q: wrong dtype"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              mla::check_tensor(v, "k", DType::float32, {2, 5, 4});
            }).find("k: wrong size of dimension 1"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              mla::check_tensor(v, "v", DType::float32, {2, 3});
            }).find("v: wrong rank"),
            std::string::npos);
  TensorView null_view = v;
  null_view.data = nullptr;
  EXPECT_NE(message_of([&] {
              mla::check_tensor(null_view, "out", DType::float32, {2, 3, 4});
            }).find("null data"),
            std::string::npos);
}

TEST(TensorView, RejectsNegativeExtentAndExcessRank) {
  EXPECT_THROW(TensorView::contiguous(nullptr, DType::float32, {2, -1}), mla::Error);
  EXPECT_THROW(TensorView::contiguous(nullptr, DType::float32, {1, 1, 1, 1, 1}), mla::Error);
}

}  // namespace
