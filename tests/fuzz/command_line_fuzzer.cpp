// Fuzzes mla-prefill's argument parsing: the input, split at NUL bytes, is
// argv after "mla-prefill". Only parsing happens (parse_command_line), never
// the chosen command, so no file is read or written. Only mla::Error (a bad
// --log-level) may come out.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "mla/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"mla-prefill"};
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (size != 0) args.push_back(current);
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);  // as the C runtime passes it

  try {
    const mla::tools::CommandLine line = mla::tools::parse_command_line(static_cast<int>(args.size()), argv.data());
    // What main() relies on: a run has its action, help has text, an error a message.
    switch (line.action) {
      case mla::tools::CommandLine::Action::run:
        if (!line.command.run || line.command.app == nullptr || !line.command.app->parsed()) std::abort();
        break;
      case mla::tools::CommandLine::Action::help:
        if (line.help.empty()) std::abort();
        break;
      case mla::tools::CommandLine::Action::usage_error:
        if (line.error.empty()) std::abort();
        break;
    }
  } catch (const mla::Error&) {
  }
  return 0;
}
