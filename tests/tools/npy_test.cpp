// The command's .npy reader and writer. Files for the reader are built byte by
// byte here, independently of the writer, so one cannot hide the other's bug.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>

#include <sys/resource.h>
#include <unistd.h>

#include "mla/error.hpp"
#include "npy.hpp"

namespace mla::tools {
namespace {

// A .npy file: magic, version, little-endian header length, header, payload.
std::string npy_file(std::string_view header, std::string_view payload = {}, int major = 1) {
  std::string bytes("\x93NUMPY", 6);
  bytes.push_back(static_cast<char>(major));
  bytes.push_back('\0');
  const std::size_t width = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < width; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  bytes += header;
  bytes += payload;
  return bytes;
}

template <class T>
std::string payload_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Expects parse_npy to raise Error(category) whose message contains `text`.
void expect_parse_error(const std::string& bytes, const std::string& text,
                        ErrorCategory category = ErrorCategory::invalid_argument) {
  try {
    parse_npy(bytes, "case.npy");
    ADD_FAILURE() << "no error; expected one containing: " << text;
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), category);
    EXPECT_NE(std::string(error.what()).find(text), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("case.npy"), std::string::npos) << error.what();
  }
}

TEST(NpyRead, Float32AsNumPyWritesIt) {
  const std::vector<float> values{1.5f, -2.25f, 3.0f, 0.1f, -7.0f, 1e-3f};
  const NpyArray array = parse_npy(
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", payload_of(values)), "a");
  EXPECT_EQ(array.type, NpyType::float32);
  EXPECT_EQ(array.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(array.to_floats("a"), values);
  EXPECT_EQ(array.describe(), "float32[2, 3]");
}

TEST(NpyRead, DoubleQuotesAnyKeyOrderNoTrailingCommaVersion2) {
  const std::vector<std::int64_t> values{-3, 1LL << 40, 7};
  const NpyArray array =
      parse_npy(npy_file("{ \"shape\" :(3,),\"fortran_order\":False , \"descr\":\"<i8\"}", payload_of(values), 2), "b");
  EXPECT_EQ(array.type, NpyType::int64);
  EXPECT_EQ(array.to_integers("b"), values);
}

TEST(NpyRead, Float16ValuesAreWidenedExactly) {
  // 1.0, -2.0, 65504 (max half), 2^-24 (smallest subnormal)
  const std::vector<std::uint16_t> bits{0x3c00, 0xc000, 0x7bff, 0x0001};
  const NpyArray array =
      parse_npy(npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }\n", payload_of(bits)), "c");
  EXPECT_EQ(array.to_floats("c"), (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
}

TEST(NpyRead, Int32WidensWithSign) {
  const std::vector<std::int32_t> values{0, -1, 2147483647};
  const NpyArray array =
      parse_npy(npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }\n", payload_of(values)), "d");
  EXPECT_EQ(array.to_integers("d"), (std::vector<std::int64_t>{0, -1, 2147483647}));
}

TEST(NpyRead, ZeroDimensionalAndEmptyArrays) {
  const NpyArray scalar =
      parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", payload_of<float>({4.0f})), "e");
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.to_floats("e"), std::vector<float>{4.0f});
  const NpyArray empty =
      parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 16, 192), }\n"), "f");
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.to_floats("f").empty());
}

TEST(NpyRead, RejectsMalformedFiles) {
  const std::string f4_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::string two_floats = payload_of<float>({1.0f, 2.0f});
  expect_parse_error("", "missing the \\x93NUMPY magic");
  expect_parse_error("PK\x03\x04 this is a zip file", "missing the \\x93NUMPY magic");
  expect_parse_error(npy_file(f4_header, two_floats, 3), "unsupported format version 3.0");
  expect_parse_error(std::string("\x93NUMPY\x01\x00\x10", 9), "truncated before the header length");
  expect_parse_error(npy_file(f4_header).substr(0, 20), "truncated inside the header");
  expect_parse_error(npy_file(f4_header, two_floats.substr(0, 6)), "truncated data: 6 bytes after the header, 8");
  expect_parse_error(npy_file(f4_header, two_floats + "xx"), "trailing data: 10 bytes");
}

TEST(NpyRead, RejectsBadHeaders) {
  expect_parse_error(npy_file("['descr', '<f4']"), "bad header: expected '{'");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False}"), "header has no 'shape'");
  expect_parse_error(npy_file("{'descr': '<f4', 'shape': (1,)}"), "header has no 'fortran_order'");
  expect_parse_error(npy_file("{'fortran_order': False, 'shape': (1,)}"), "header has no 'descr'");
  expect_parse_error(npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"),
                     "duplicate header key 'descr'");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}"),
                     "unknown header key 'extra'");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}"), "True or False");
  expect_parse_error(npy_file("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}"), "bad header");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)"), "expected '}'");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x"), "unexpected text");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (5)}"), "shape must be a tuple");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"), "non-negative integers");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}"), "expected ')'");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
                     "shape entry too large");
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}"),
                     "shape is too large");
}

TEST(NpyRead, RejectsUnsupportedLayoutsAndTypes) {
  const std::string payload = payload_of<float>({1.0f, 2.0f});
  expect_parse_error(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", payload),
                     "Fortran-order arrays are not supported");
  expect_parse_error(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", payload),
                     "unsupported dtype '<f8'");
  expect_parse_error(npy_file("{'descr': '|i1', 'fortran_order': False, 'shape': (8,)}", payload),
                     "unsupported dtype '|i1'");
  expect_parse_error(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", payload),
                     "big-endian arrays ('>f4') are not supported");
}

TEST(NpyRead, ConversionsNameTheArgumentOnTheWrongKind) {
  const NpyArray ints = parse_npy(
      npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (1,)}", payload_of<std::int32_t>({3})), "g");
  try {
    ints.to_floats("--q");
    ADD_FAILURE() << "int32 converted to floats";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "--q: expected a float32 or float16 array, got int32[1]");
  }
  const NpyArray floats =
      parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", payload_of<float>({3.0f})), "h");
  EXPECT_THROW(floats.to_integers("--cu-seqlens-q"), Error);
  EXPECT_THROW(floats.bytes("--cache"), Error);
  const NpyArray bytes =
      parse_npy(npy_file("{'descr': '|u1', 'fortran_order': False, 'shape': (2,)}", "\x38\xb8"), "b");
  EXPECT_EQ(bytes.bytes("--cache"), (std::vector<unsigned char>{0x38, 0xb8}));
  EXPECT_EQ(bytes.describe(), "uint8[2]");
}

TEST(NpyWrite, RoundTripsEveryTypeWithAlignedHeader) {
  for (NpyType type : {NpyType::float32, NpyType::float16, NpyType::int32, NpyType::int64, NpyType::uint8}) {
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{}, {0}, {5}, {2, 3, 4}, {3, 1, 7, 2}}) {
      NpyArray array;
      array.type = type;
      array.shape = shape;
      array.data.resize(static_cast<std::size_t>(array.numel()) * npy_item_size(type));
      for (std::size_t i = 0; i < array.data.size(); ++i) array.data[i] = static_cast<unsigned char>(i * 37 + 11);
      const std::string bytes = encode_npy(array);
      const std::size_t header_length =
          static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
      EXPECT_EQ(bytes[6], 1);
      EXPECT_EQ((10 + header_length) % 64, 0u) << array.describe();
      EXPECT_EQ(bytes[10 + header_length - 1], '\n');
      const NpyArray back = parse_npy(bytes, "round trip");
      EXPECT_EQ(back.type, type);
      EXPECT_EQ(back.shape, shape);
      EXPECT_EQ(back.data, array.data) << array.describe();
    }
  }
}

TEST(NpyWrite, LongHeaderUsesVersion2) {
  NpyArray array;
  array.shape.assign(30000, 1);  // a header longer than 65535 characters
  array.data.resize(4);
  const std::string bytes = encode_npy(array);
  EXPECT_EQ(bytes[6], 2);
  const NpyArray back = parse_npy(bytes, "long");
  EXPECT_EQ(back.rank(), 30000);
}

TEST(NpyWrite, Float32FileRoundTripAndIoErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("mla_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "x.npy").string();
  const std::vector<float> values{0.5f, -1.0f, NAN, INFINITY, -INFINITY, 3.25f};
  write_npy(path, make_float32_array({3, 2}, values));
  const std::vector<float> back = read_npy(path).to_floats("x");
  ASSERT_EQ(back.size(), values.size());
  EXPECT_EQ(std::memcmp(back.data(), values.data(), values.size() * sizeof(float)), 0);

  try {
    read_npy((dir / "missing.npy").string());
    ADD_FAILURE() << "missing file read";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::io);
    EXPECT_NE(std::string(error.what()).find("cannot open"), std::string::npos);
  }
  EXPECT_THROW(write_npy((dir / "no_such_dir" / "y.npy").string(), make_float32_array({1}, {1.0f})), Error);
  EXPECT_THROW(make_float32_array({2, 2}, {1.0f}), Error);
  std::filesystem::remove_all(dir);
}

// A disk that fills up half-way through a write (simulated with a file size
// limit, which makes write() fail with EFBIG): one io error, the previous file
// unchanged, no partial file left, and the next write works.
TEST(NpyWrite, AFailedWriteLeavesThePreviousFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("mla_npy_full_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "out.npy").string();
  write_npy(path, make_float32_array({2}, {1.0f, 2.0f}));
  const auto before = std::filesystem::file_size(path);

  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // fail the write instead of killing the process
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_npy(path, make_float32_array({100000}, std::vector<float>(100000, 3.0f)));
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::io);
    message = error.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(message.find("cannot write '" + path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("previous file is unchanged"), std::string::npos) << message;
  EXPECT_EQ(std::filesystem::file_size(path), before);
  EXPECT_EQ(read_npy(path).to_floats("out"), (std::vector<float>{1.0f, 2.0f}));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u) << "a partial file was left behind";
  write_npy(path, make_float32_array({1}, {5.0f}));
  EXPECT_EQ(read_npy(path).to_floats("out"), std::vector<float>{5.0f});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mla::tools
