// A small reader and writer for NumPy's .npy format (versions 1.0 and 2.0),
// enough for the command's tensors: little-endian float32, float16, int32 and
// int64 arrays, and uint8 bytes (an fp8 cache), in C order. Internal to the command, not part of the library.
//
// Every malformed input (bad magic, unsupported version, a header that is not
// the dict NumPy writes, an unsupported dtype, Fortran order, a payload that
// does not match the shape) raises mla::Error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mla::tools {

// The element types the command reads and writes, by their .npy descr.
enum class NpyType {
  float32,  // '<f4'
  float16,  // '<f2'
  int32,    // '<i4'
  int64,    // '<i8'
  uint8,    // '|u1': raw bytes, e.g. fp8 e4m3 values
};

std::string_view npy_descr(NpyType type);
std::size_t npy_item_size(NpyType type);

struct NpyArray {
  NpyType type = NpyType::float32;
  std::vector<std::int64_t> shape;  // empty for a 0-d array
  std::vector<unsigned char> data;  // little-endian payload, C order

  std::int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  // "float32[7, 16, 192]"
  std::string describe() const;

  // Element values widened; raise Error(invalid_argument) naming `what` when
  // the array holds the other kind (integers where floats are expected, ...).
  std::vector<float> to_floats(std::string_view what) const;
  std::vector<std::int64_t> to_integers(std::string_view what) const;
  // The payload of a uint8 array; raises like the two above for other types.
  const std::vector<unsigned char>& bytes(std::string_view what) const;
};

// Parses the bytes of a whole .npy file; `source` names it in messages.
NpyArray parse_npy(std::string_view bytes, const std::string& source);
// Reads and parses a file; a missing or unreadable file raises Error(io).
NpyArray read_npy(const std::string& path);

// The bytes of a version 1.0 file (2.0 when the header needs it).
std::string encode_npy(const NpyArray& array);
void write_npy(const std::string& path, const NpyArray& array);

// Builds a float32 array from values; raises Error(internal) when the shape
// does not match the number of values.
NpyArray make_float32_array(std::vector<std::int64_t> shape, const std::vector<float>& values);

}  // namespace mla::tools
