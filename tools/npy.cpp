#include "npy.hpp"

#include <unistd.h>
#include <bit>
#include <cctype>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <system_error>

#include "mla/detail/numeric.hpp"
#include "mla/error.hpp"
#include "mla/tensor.hpp"

namespace mla::tools {
namespace {

// Payloads are copied to and from memory as they are; .npy data we accept is
// little-endian, so the host must be too.
static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

// What each NpyType is in a header, in memory and in messages, in the
// order of the enum.
struct NpyTypeInfo {
  std::string_view descr;
  std::size_t item_size;
  std::string_view name;
};
constexpr NpyTypeInfo npy_types[] = {
    {"<f4", 4, "float32"}, {"<f2", 2, "float16"}, {"<i4", 4, "int32"}, {"<i8", 8, "int64"}, {"|u1", 1, "uint8"},
};
static_assert(std::size(npy_types) == static_cast<std::size_t>(NpyType::uint8) + 1, "one row per NpyType");

const NpyTypeInfo& npy_type_info(NpyType type) {
  const auto index = static_cast<std::size_t>(type);
  if (index >= std::size(npy_types)) raise(ErrorCategory::internal, "unknown NpyType");
  return npy_types[index];
}

constexpr std::string_view npy_magic{"\x93NUMPY", 6};
constexpr std::size_t header_alignment = 64;

[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  raise(ErrorCategory::invalid_argument, source + ": not a valid .npy file: " + what);
}

std::uint32_t read_le(std::string_view bytes, std::size_t offset, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// This parser accepts exactly the literals NumPy writes there: quoted strings,
// True/False and tuples of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  struct Fields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::int64_t>> shape;
  };

  Fields parse() {
    Fields fields;
    expect('{');
    while (!try_consume('}')) {
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        set_once(fields.descr, parse_string(), key);
      } else if (key == "fortran_order") {
        set_once(fields.fortran_order, parse_bool(), key);
      } else if (key == "shape") {
        set_once(fields.shape, parse_shape(), key);
      } else {
        fail("unknown header key '" + key + "' (expected descr, fortran_order, shape)");
      }
      if (!try_consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict");
    if (!fields.descr) fail("header has no 'descr'");
    if (!fields.fortran_order) fail("header has no 'fortran_order'");
    if (!fields.shape) fail("header has no 'shape'");
    return fields;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { malformed(source_, "bad header: " + what); }

  template <class T>
  void set_once(std::optional<T>& slot, T value, const std::string& key) const {
    if (slot) fail("duplicate header key '" + key + "'");
    slot = std::move(value);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool try_consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!try_consume(c)) fail(std::string("expected '") + c + "'");
  }

  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a quoted string");
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail("fortran_order must be True or False");
  }

  std::int64_t parse_dimension() {
    skip_space();
    const std::size_t start = pos_;
    std::int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("shape entry too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail("shape entries must be non-negative integers");
    return value;
  }

  // "()", "(5,)", "(2, 3)", "(2, 3,)"; "(5)" is an int in Python, not a tuple.
  std::vector<std::int64_t> parse_shape() {
    expect('(');
    std::vector<std::int64_t> shape;
    bool trailing_comma = false;
    while (!try_consume(')')) {
      shape.push_back(parse_dimension());
      trailing_comma = try_consume(',');
      if (!trailing_comma) {
        expect(')');
        break;
      }
    }
    if (shape.size() == 1 && !trailing_comma) fail("shape must be a tuple, e.g. (5,)");
    return shape;
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

NpyType parse_descr(const std::string& descr, const std::string& source) {
  for (NpyType type : {NpyType::float32, NpyType::float16, NpyType::int32, NpyType::int64, NpyType::uint8}) {
    if (descr == npy_descr(type)) return type;
  }
  if (!descr.empty() && descr[0] == '>') {
    raise(ErrorCategory::invalid_argument, source + ": big-endian arrays ('" + descr + "') are not supported");
  }
  raise(ErrorCategory::invalid_argument,
        source + ": unsupported dtype '" + descr +
            "'; expected float32 ('<f4') or float16 ('<f2') tensors, int32 ('<i4') or int64 ('<i8') cu_seqlens, "
            "or uint8 ('|u1') fp8 bytes");
}

std::int64_t checked_numel(const std::vector<std::int64_t>& shape, std::size_t item_size, const std::string& source) {
  const auto limit = std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(item_size);
  std::int64_t count = 1;
  for (std::int64_t extent : shape) {
    if (extent != 0 && count > limit / extent) malformed(source, "shape is too large");
    count *= extent;
  }
  return count;
}

std::string shape_string(const std::vector<std::int64_t>& shape, bool python_tuple) {
  std::ostringstream out;
  out << (python_tuple ? '(' : '[');
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  if (python_tuple && shape.size() == 1) out << ',';
  out << (python_tuple ? ')' : ']');
  return out.str();
}

}  // namespace

std::string_view npy_descr(NpyType type) { return npy_type_info(type).descr; }

std::size_t npy_item_size(NpyType type) { return npy_type_info(type).item_size; }

std::int64_t NpyArray::numel() const {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  return count;
}

std::string NpyArray::describe() const { return std::string(npy_type_info(type).name) + shape_string(shape, false); }

std::vector<float> NpyArray::to_floats(std::string_view what) const {
  const auto count = static_cast<std::size_t>(numel());
  std::vector<float> values(count);
  if (type == NpyType::float32) {
    // An empty array's vectors may hold null pointers, which memcpy must not get.
    if (count != 0) std::memcpy(values.data(), data.data(), count * sizeof(float));
  } else if (type == NpyType::float16) {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, data.data() + 2 * i, 2);
      values[i] = numeric::half_to_float(bits);
    }
  } else {
    raise(ErrorCategory::invalid_argument,
          std::string(what) + ": expected a float32 or float16 array, got " + describe());
  }
  return values;
}

std::vector<std::int64_t> NpyArray::to_integers(std::string_view what) const {
  const auto count = static_cast<std::size_t>(numel());
  std::vector<std::int64_t> values(count);
  if (type == NpyType::int64) {
    if (count != 0) std::memcpy(values.data(), data.data(), count * sizeof(std::int64_t));
  } else if (type == NpyType::int32) {
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t value;
      std::memcpy(&value, data.data() + 4 * i, 4);
      values[i] = value;
    }
  } else {
    raise(ErrorCategory::invalid_argument, std::string(what) + ": expected an int32 or int64 array, got " + describe());
  }
  return values;
}

const std::vector<unsigned char>& NpyArray::bytes(std::string_view what) const {
  if (type != NpyType::uint8) {
    raise(ErrorCategory::invalid_argument, std::string(what) + ": expected a uint8 array, got " + describe());
  }
  return data;
}

NpyArray parse_npy(std::string_view bytes, const std::string& source) {
  if (bytes.size() < npy_magic.size() + 2 || bytes.substr(0, npy_magic.size()) != npy_magic) {
    malformed(source, "missing the \\x93NUMPY magic");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2) || minor != 0) {
    malformed(source, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                          " (1.0 and 2.0 are supported)");
  }
  const std::size_t length_width = major == 1 ? 2 : 4;
  const std::size_t header_start = 8 + length_width;
  if (bytes.size() < header_start) malformed(source, "truncated before the header length");
  const std::size_t header_length = read_le(bytes, 8, length_width);
  if (bytes.size() - header_start < header_length) malformed(source, "truncated inside the header");

  const auto fields = HeaderParser(bytes.substr(header_start, header_length), source).parse();
  if (*fields.fortran_order) {
    raise(ErrorCategory::invalid_argument,
          source + ": Fortran-order arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
  }
  NpyArray array;
  array.type = parse_descr(*fields.descr, source);
  array.shape = *fields.shape;
  const std::size_t item_size = npy_item_size(array.type);
  const auto payload_size = static_cast<std::uint64_t>(checked_numel(array.shape, item_size, source)) * item_size;
  const std::size_t available = bytes.size() - header_start - header_length;
  if (available != payload_size) {
    malformed(source, (available < payload_size ? "truncated data: " : "trailing data: ") + std::to_string(available) +
                          " bytes after the header, " + std::to_string(payload_size) + " expected for " +
                          array.describe());
  }
  const auto* payload = reinterpret_cast<const unsigned char*>(bytes.data() + header_start + header_length);
  array.data.assign(payload, payload + payload_size);
  return array;
}

NpyArray read_npy(const std::string& path) {
  // A directory opens as a stream on Linux and fails only at the first read,
  // with an exception that names no path.
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) raise(ErrorCategory::io, "cannot read '" + path + "': a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file) raise(ErrorCategory::io, "cannot open '" + path + "': " + std::strerror(errno));
  std::string bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& failure) {
    raise(ErrorCategory::io, "cannot read '" + path + "': " + failure.what());
  }
  if (file.bad()) raise(ErrorCategory::io, "cannot read '" + path + "'");
  return parse_npy(bytes, path);
}

std::string encode_npy(const NpyArray& array) {
  const auto expected = static_cast<std::size_t>(checked_numel(array.shape, npy_item_size(array.type), "array")) *
                        npy_item_size(array.type);
  if (array.data.size() != expected) raise(ErrorCategory::internal, "npy: payload does not match " + array.describe());
  std::string header = "{'descr': '" + std::string(npy_descr(array.type)) +
                       "', 'fortran_order': False, 'shape': " + shape_string(array.shape, true) + ", }";
  // Pad with spaces and end with '\n' so that the payload starts on a
  // 64-byte boundary, as NumPy writes it.
  const bool version2 = 10 + header.size() + 1 > std::numeric_limits<std::uint16_t>::max();
  const std::size_t prefix = version2 ? 12 : 10;
  const std::size_t padded = (prefix + header.size() + 1 + header_alignment - 1) / header_alignment * header_alignment;
  header.append(padded - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::string bytes(npy_magic);
  bytes.push_back(static_cast<char>(version2 ? 2 : 1));
  bytes.push_back('\0');
  for (std::size_t i = 0; i < prefix - 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return bytes;
}

void write_npy(const std::string& path, const NpyArray& array) {
  const std::string bytes = encode_npy(array);
  // Written beside the target and renamed over it, so a write that fails
  // half-way (a full disk) leaves an existing file as it was and no debris.
  const std::string partial = path + ".partial-" + std::to_string(::getpid());
  std::ofstream file(partial, std::ios::binary | std::ios::trunc);
  if (!file) raise(ErrorCategory::io, "cannot create '" + path + "': " + std::strerror(errno));
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.flush();
  const int write_error = file ? 0 : errno;
  file.close();
  if (write_error != 0 || !file) {
    std::remove(partial.c_str());
    raise(ErrorCategory::io, "cannot write '" + path + "': " +
                                 (write_error != 0 ? std::strerror(write_error) : "the file could not be closed") +
                                 " (any previous file is unchanged)");
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int rename_error = errno;
    std::remove(partial.c_str());
    raise(ErrorCategory::io, "cannot replace '" + path + "': " + std::strerror(rename_error));
  }
}

NpyArray make_float32_array(std::vector<std::int64_t> shape, const std::vector<float>& values) {
  NpyArray array;
  array.type = NpyType::float32;
  array.shape = std::move(shape);
  if (static_cast<std::size_t>(array.numel()) != values.size()) {
    raise(ErrorCategory::internal, "npy: " + std::to_string(values.size()) + " values do not fill " + array.describe());
  }
  const auto* raw = reinterpret_cast<const unsigned char*>(values.data());
  array.data.assign(raw, raw + values.size() * sizeof(float));
  return array;
}

}  // namespace mla::tools
