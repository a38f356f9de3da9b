// mla-prefill: inspect backend selection, run prefill attention on .npy
// tensors, merge partial attention states, and benchmark the chosen backend.
//
// Every failure ends in one line on stderr, "mla-prefill: error: <message>",
// and a non-zero exit status (see command.hpp for which).
#include <iostream>
#include <optional>

#include "command.hpp"

namespace {

constexpr const char* error_prefix = "mla-prefill: error: ";

int run_command_line(int argc, char** argv) {
  CLI::App app{"MLA prefill attention: backend selection, runs on .npy tensors, merges and benchmarks."};
  app.name("mla-prefill");
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow the subcommand
  std::optional<std::string> log_level;
  mla::tools::add_optional(app, "--log-level", log_level,
                           "library log level: trace, debug, info, warn, error, off (default: the configuration's "
                           "logging.level, info shown as warn since the command reports the selection itself)");
  app.footer(
      "Exit status: 0 on success; 2 for bad flags, files or configuration, or a backend that cannot run "
      "here; 1 when the computation itself fails.");

  const std::vector<mla::tools::Command> commands = {
      mla::tools::add_backends_command(app),
      mla::tools::add_run_command(app),
      mla::tools::add_merge_command(app),
      mla::tools::add_bench_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::cerr << error_prefix << error.what() << " (see mla-prefill --help)\n";
    return mla::tools::exit_usage_error;
  }

  std::optional<mla::LogLevel> level;
  if (log_level) level = mla::parse_log_level(*log_level);
  mla::tools::set_log_level_override(level);
  mla::set_log_level(level.value_or(mla::LogLevel::warn));  // until a command reads the configuration
  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return mla::tools::exit_usage_error;  // unreachable: CLI11 requires one subcommand
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
