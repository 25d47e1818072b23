// pentamesh: plan and run 5D-parallel LLM training. See README.md for the subcommands.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/launch_cli.h"
#include "pm_git.h"  // PM_GIT_COMMIT, generated at build time

int main(int argc, char** argv) {
  using namespace pentamesh::cli;
  CLI::App app{"pentamesh: plan and run 5D-parallel (DP x TP x PP x CP x EP) LLM training",
               "pentamesh"};  // named: usage lines say "pentamesh", not the path it ran from
  app.require_subcommand(1);
  app.set_version_flag("--version", "pentamesh " PM_VERSION " (git " PM_GIT_COMMIT ")");
  std::vector<std::pair<CLI::App*, RunFn>> commands;
  auto add = [&](RunFn (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    RunFn run = fn(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  };
  add(AddPresetsCommand);
  add(AddScheduleCommand);
  add(AddTokenizerCommand);
  add(AddTokenizeCommand);
  add(AddTrainCommand);
  add(AddEstimateCommand);
  add(AddPlanCommand);
  add(AddScaleCommand);
  add(AddSweepCommand);
  add(AddReportCommand);
  add(AddExportCommand);
  add(AddImportCommand);
  add(AddImportConfigCommand);
  add(AddValidateCommand);
  add(AddCalibrateCommand);
  add(AddTuneCommand);
  add(AddServeCommand);
  add(AddGenerateCommand);
  SetCommandLine(argc, argv);
  return Dispatch(app, commands, argc, argv);
}
