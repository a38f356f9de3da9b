#include <gtest/gtest.h>

#include <string>

#include "mla/backend.hpp"
#include "mla/backend/checks.hpp"
#include "mla/error.hpp"

namespace {

std::string error_of(const mla::PrefillMetadata& m) {
  try {
    mla::check_metadata(m);
  } catch (const mla::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Metadata, FromLengthsBuildsCumulativeSums) {
  auto m = mla::PrefillMetadata::from_lengths({3, 0, 1, 17}, {3, 0, 1, 17});
  EXPECT_EQ(m.cu_seqlens_q, (std::vector<std::int32_t>{0, 3, 3, 4, 21}));
  EXPECT_EQ(m.max_seqlen_q, 17);
  EXPECT_EQ(m.batch_size(), 4);
  EXPECT_EQ(m.num_q_tokens(), 21);
  m.add_chunk({5, 0, 0, 2});
  EXPECT_EQ(m.chunks[0].cu_seqlens_k.back(), 7);
  EXPECT_EQ(m.chunks[0].max_seqlen_k, 5);
  EXPECT_EQ(error_of(m), "no error");
  EXPECT_THROW(m.add_chunk({1, 2}), mla::Error);
  EXPECT_THROW(mla::PrefillMetadata::from_lengths({1, -1}, {1, 1}), mla::Error);
}

TEST(Metadata, RejectsBadCuSeqlens) {
  auto m = mla::PrefillMetadata::from_lengths({2, 2}, {2, 2});
  m.cu_seqlens_q = {1, 2, 4};
  EXPECT_NE(error_of(m).find("must start at 0"), std::string::npos);
  m.cu_seqlens_q = {0, 3, 2};
  EXPECT_NE(error_of(m).find("non-decreasing"), std::string::npos);
  m.cu_seqlens_q = {0, 2};
  EXPECT_NE(error_of(m).find("entries"), std::string::npos);
  m.cu_seqlens_q = {};
  EXPECT_NE(error_of(m).find("at least one entry"), std::string::npos);
  m = mla::PrefillMetadata::from_lengths({2, 2}, {2, 2});
  m.max_seqlen_k = 1;
  EXPECT_NE(error_of(m).find("smaller than the longest"), std::string::npos);
}

TEST(Metadata, CuSeqlensTotalMustMatchTensor) {
  EXPECT_NO_THROW(mla::check_cu_seqlens({0, 2, 5}, "cu_seqlens_q", 5));
  try {
    mla::check_cu_seqlens({0, 2, 5}, "cu_seqlens_q", 6);
    FAIL();
  } catch (const mla::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the 6 tokens"), std::string::npos);
  }
}

}  // namespace
