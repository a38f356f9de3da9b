// mla-prefill: inspect backend selection, run prefill attention on .npy
// tensors, merge partial attention states, and benchmark the chosen backend.
//
// Every failure ends in one line on stderr, "mla-prefill: error: <message>",
// and a non-zero exit status (see command.hpp for which).
#include <iostream>

#include "command_line.hpp"

namespace {

constexpr const char* error_prefix = "mla-prefill: error: ";

int run_command_line(int argc, char** argv) {
  const mla::tools::CommandLine line = mla::tools::parse_command_line(argc, argv);
  switch (line.action) {
    case mla::tools::CommandLine::Action::help:
      std::cout << line.help;
      return line.help_status;
    case mla::tools::CommandLine::Action::usage_error:
      std::cerr << error_prefix << line.error << " (see mla-prefill --help)\n";
      return mla::tools::exit_usage_error;
    case mla::tools::CommandLine::Action::run:
      break;
  }
  mla::tools::set_log_level_override(line.log_level);
  mla::set_log_level(line.log_level.value_or(mla::LogLevel::warn));  // until a command reads the configuration
  return line.command.run();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_command_line(argc, argv);
  } catch (const mla::Error& error) {
    std::cerr << error_prefix << error.what() << '\n';
    const bool computation_failed =
        error.category() == mla::ErrorCategory::device || error.category() == mla::ErrorCategory::internal;
    return computation_failed ? mla::tools::exit_failure : mla::tools::exit_usage_error;
  } catch (const std::exception& error) {
    std::cerr << error_prefix << error.what() << '\n';
    return mla::tools::exit_failure;
  }
}
