// mla-prefill-conformance: the conformance suite against an outside backend.
//
//   mla-prefill-conformance --plugin path/to/libx.so [--plugin ...] [gtest flags]
//
// Loads each plugin (one of them registers member CUSTOM), then runs every
// conformance test against CUSTOM, each compared with REFERENCE on the same
// random inputs. Exit status 0 when every test passes or skips (a dtype or
// shape the backend does not list is skipped with validate()'s reasons), 1
// when one fails, 2 for bad arguments or a plugin that does not load.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mla/backend/registration.hpp"
#include "mla/error.hpp"
#include "mla/selector.hpp"

namespace {

int usage(const char* problem) {
  std::fprintf(stderr,
               "mla-prefill-conformance: %s\n"
               "usage: mla-prefill-conformance --plugin path/to/libx.so [--plugin ...] [--gtest_filter=...]\n",
               problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // takes the --gtest_* flags out of argv
  std::vector<std::string> plugins;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--plugin" && i + 1 < argc) {
      plugins.emplace_back(argv[++i]);
    } else if (arg.rfind("--plugin=", 0) == 0) {
      plugins.push_back(arg.substr(9));
    } else {
      return usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  // Listing needs no backend: test discovery runs the program with --gtest_list_tests alone.
  if (plugins.empty() && !GTEST_FLAG_GET(list_tests)) return usage("no --plugin given");
  try {
    for (const std::string& plugin : plugins) mla::load_plugin(plugin);
  } catch (const mla::Error& error) {
    std::fprintf(stderr, "mla-prefill-conformance: %s\n", error.what());
    return 2;
  }
  return RUN_ALL_TESTS();
}
