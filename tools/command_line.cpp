#include "command_line.hpp"

#include <sstream>
#include <vector>

namespace mla::tools {

CommandLine parse_command_line(int argc, const char* const* argv) {
  CommandLine line;
  line.app = std::make_unique<CLI::App>(
      "MLA prefill attention: backend selection, runs on .npy tensors, merges and benchmarks.");
  CLI::App& app = *line.app;
  app.name("mla-prefill");
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow the subcommand
  // A local, not a member of `line`: the option keeps a reference to it, and
  // `line` moves when it is returned.
  std::optional<std::string> log_level;
  add_optional(app, "--log-level", log_level,
               "library log level: trace, debug, info, warn, error, off (default: the configuration's "
               "logging.level, info shown as warn since the command reports the selection itself)");
  app.footer(
      "Exit status: 0 on success; 2 for bad flags, files or configuration, or a backend that cannot run "
      "here; 1 when the computation itself fails.");

  const std::vector<Command> commands = {
      add_backends_command(app), add_run_command(app),  add_merge_command(app),
      add_bench_command(app),    add_step_command(app),
  };

  // --help and --help-all: CLI11 picks the text (the chosen subcommand's
  // help, or all of it).
  const auto set_help = [&](const CLI::Error& help) {
    std::ostringstream out;
    line.help_status = app.exit(help, out);
    line.help = out.str();
    line.action = CommandLine::Action::help;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    set_help(help);
    return line;
  } catch (const CLI::CallForAllHelp& help) {
    set_help(help);
    return line;
  } catch (const CLI::ParseError& error) {
    line.error = error.what();
    line.action = CommandLine::Action::usage_error;
    return line;
  }

  if (log_level) line.log_level = parse_log_level(*log_level);
  for (const Command& command : commands) {
    if (command.app->parsed()) {
      line.command = command;
      line.action = CommandLine::Action::run;
      return line;
    }
  }
  // Unreachable: require_subcommand(1) makes CLI11 reject a line without one.
  line.error = "a subcommand is required";
  return line;
}

}  // namespace mla::tools
