// libFuzzer target that reaches the CLI: the input is an argument list, one argument per line
// (fuzz/seeds/cli/*), for `estimate`, `plan`, `schedule`, `sweep` or `scale`; compiled with
// PM_FUZZ_SERVE it is serve_fuzz, the same for `serve` (fuzz/seeds/serve/*: its model, cluster
// and stack files, its workload, engine and SLO flags and the simulation), whose --emit DIR
// becomes a temporary directory. It is parsed by the
// same CLI11 app and cli::Dispatch as the binary, so flags, presets, TOML files named on the
// command line, the shared input rules and the whole cost model and search run as a user would
// run them. fuzz/cli_properties.h says what every outcome must satisfy (exit 0 or 2; finite,
// consistent JSON); a violation traps. Built with ASan and UBSan (fuzz/CMakeLists.txt), so any
// overflow, out-of-bounds access or leak is a crash too. Output files become /dev/null.
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli_properties.h"

namespace {

int g_out_fd = -1;  // a memfd standing in for stdout

std::string TakeStdout() {
  std::fflush(stdout);
  std::string out;
  char buf[4096];
  off_t offset = 0;
  for (ssize_t n; (n = pread(g_out_fd, buf, sizeof buf, offset)) > 0; offset += n) {
    out.append(buf, static_cast<size_t>(n));
  }
  if (ftruncate(g_out_fd, 0) != 0) __builtin_trap();
  lseek(1, 0, SEEK_SET);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_out_fd = memfd_create("cli_fuzz_stdout", 0);
  if (g_out_fd < 0 || dup2(g_out_fd, 1) < 0) __builtin_trap();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  std::vector<std::string> args =
      fuzz::ArgsFromText(std::string(reinterpret_cast<const char*>(data), size));
#ifdef PM_FUZZ_SERVE
  static const std::set<std::string> kCommands = {"serve"};
  static const auto kAdd = {cli::AddServeCommand};
  fuzz::EmitToTempDir(args);
#else
  static const std::set<std::string> kCommands = {"estimate", "plan", "schedule", "sweep", "scale"};
  static const auto kAdd = {cli::AddScheduleCommand, cli::AddEstimateCommand, cli::AddPlanCommand,
                            cli::AddScaleCommand, cli::AddSweepCommand};
#endif
  if (args.empty() || !kCommands.count(args[0])) return 0;
  args.insert(args.begin(), "pentamesh");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  CLI::App app{"pentamesh (cli_fuzz)"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, cli::RunFn>> commands;
  for (auto fn : kAdd) {
    const size_t before = app.get_subcommands({}).size();
    cli::RunFn run = fn(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  }
  TakeStdout();
  const int code = cli::Dispatch(app, commands, static_cast<int>(argv.size()), argv.data());
  const std::string out = TakeStdout();
  // JSON was asked for when the parsed subcommand saw --json (and printed no help instead). A -h
  // after `--` is not the subcommand's (it has no positionals): CLI11 hands it back to the main
  // app, whose help prints the subcommand's page.
  const CLI::Option* app_help = app.get_option_no_throw("--help");
  const bool app_help_printed = app_help != nullptr && app_help->count() > 0;
  bool json = false;
  for (const auto& [sub, run] : commands) {
    const CLI::Option* flag = sub->get_option_no_throw("--json");
    const CLI::Option* help = sub->get_option_no_throw("--help");
    json = json || (!app_help_printed && sub->parsed() && flag != nullptr && flag->count() > 0 &&
                    (!help || help->count() == 0));
  }
  const std::string bad = fuzz::CheckCliOutcome(code, out, json);
  if (!bad.empty()) {
    std::fprintf(stderr, "cli_fuzz: property violated: %s\nstdout:\n%s\n", bad.c_str(),
                 out.c_str());
    __builtin_trap();
  }
  return 0;
}
