// The command line of mla-prefill, parsed without running anything: main()
// runs what it chose, and the argument fuzzer (tests/fuzz) parses only.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "command.hpp"

namespace mla::tools {

struct CommandLine {
  enum class Action {
    run,          // `command` was chosen; its options are filled in
    help,         // --help: print `help` on stdout and exit with `help_status`
    usage_error,  // a bad flag or value: CLI11's message is `error`
  };
  Action action = Action::usage_error;
  std::string help;
  int help_status = exit_success;
  std::string error;
  std::optional<LogLevel> log_level;  // --log-level, when given
  Command command;
  // Owns the subcommand that `command.app` points to.
  std::unique_ptr<CLI::App> app;
};

// Builds the app with every subcommand and parses argv. Parsing reads no file
// and touches neither the registry nor the log level: those happen when the
// command runs. A --log-level that names no level raises Error(config), which
// main() reports like every other error.
CommandLine parse_command_line(int argc, const char* const* argv);

}  // namespace mla::tools
