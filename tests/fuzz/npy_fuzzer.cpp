// Fuzzes mla-prefill's .npy reader: parse_npy, the in-memory half of
// read_npy, then what the command does with an array it accepted (widen it to
// floats, integers or bytes). Only mla::Error may come out. An accepted array must
// also survive encode_npy and parse_npy unchanged: a reader and writer that
// disagree would be a bug no crash reveals.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mla/error.hpp"
#include "npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  mla::tools::NpyArray array;
  try {
    array = mla::tools::parse_npy(bytes, "fuzz.npy");
  } catch (const mla::Error&) {
    return 0;
  }
  for (const int kind : {0, 1, 2}) {
    try {
      if (kind == 0) {
        (void)array.to_floats("fuzz.npy");
      } else if (kind == 1) {
        (void)array.to_integers("fuzz.npy");
      } else {
        (void)array.bytes("fuzz.npy");
      }
    } catch (const mla::Error&) {
      // Another kind of array: expected for all but one of the three.
    }
  }
  (void)array.describe();

  const mla::tools::NpyArray again = mla::tools::parse_npy(mla::tools::encode_npy(array), "encoded.npy");
  if (again.type != array.type || again.shape != array.shape || again.data != array.data) std::abort();
  return 0;
}
