// parse_command_line: mla-prefill's arguments parsed without running the
// chosen command, as main() and the argument fuzzer (tests/fuzz) use it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "command_line.hpp"
#include "mla/error.hpp"

namespace mla::tools {
namespace {

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "mla-prefill");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLine, ChoosesACommandWithoutRunningIt) {
  // Files that do not exist: parsing must not look at them.
  const CommandLine line =
      parse({"run", "--q", "no/such/q.npy", "--k", "k.npy", "--v", "v.npy", "--cu-seqlens-q", "cu.npy",
             "--cu-seqlens-k", "cu.npy", "--scale", "0.5", "--out", "no/such/dir/out.npy", "--log-level", "debug"});
  ASSERT_EQ(line.action, CommandLine::Action::run) << line.error;
  ASSERT_NE(line.command.app, nullptr);
  EXPECT_EQ(line.command.app->get_name(), "run");
  EXPECT_TRUE(static_cast<bool>(line.command.run));
  EXPECT_EQ(line.log_level, LogLevel::debug);
}

TEST(CommandLine, HelpIsText) {
  const CommandLine all = parse({"--help"});
  ASSERT_EQ(all.action, CommandLine::Action::help);
  EXPECT_EQ(all.help_status, exit_success);
  EXPECT_NE(all.help.find("backends"), std::string::npos) << all.help;
  const CommandLine bench = parse({"bench", "--help"});
  ASSERT_EQ(bench.action, CommandLine::Action::help);
  EXPECT_NE(bench.help.find("--repeats"), std::string::npos) << bench.help;
}

TEST(CommandLine, UsageErrorsCarryCli11sMessage) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {"backends", "--jsn"}, {"run", "--q", "q.npy"}, {"bench", "--repeats", "many"}}) {
    const CommandLine line = parse(args);
    EXPECT_EQ(line.action, CommandLine::Action::usage_error);
    EXPECT_FALSE(line.error.empty());
  }
}

TEST(CommandLine, BadLogLevelIsAConfigError) {
  try {
    parse({"backends", "--log-level", "loud"});
    ADD_FAILURE() << "--log-level loud was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::config);
    EXPECT_NE(std::string(error.what()).find("loud"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace mla::tools
