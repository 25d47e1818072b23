// The `pentamesh` subcommands. Each Add*Command registers one CLI11 subcommand and returns the
// function that runs it (after parsing) and gives the process exit code. Subcommands are thin:
// they parse, call the modules that do the work, print.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace pentamesh::cli {

using RunFn = std::function<int()>;

RunFn AddPresetsCommand(CLI::App& app);
RunFn AddScheduleCommand(CLI::App& app);
RunFn AddTokenizerCommand(CLI::App& app);  // tokenizer train
RunFn AddTokenizeCommand(CLI::App& app);
RunFn AddTrainCommand(CLI::App& app);  // train --config run.toml
RunFn AddEstimateCommand(CLI::App& app);
RunFn AddPlanCommand(CLI::App& app);   // cli/plan.cc
RunFn AddScaleCommand(CLI::App& app);  // cli/scale.cc
RunFn AddSweepCommand(CLI::App& app);  // cli/sweep.cc
RunFn AddReportCommand(CLI::App& app);
RunFn AddExportCommand(CLI::App& app);        // cli/export.cc: export --hf
RunFn AddImportCommand(CLI::App& app);        // cli/export.cc: import --hf
RunFn AddImportConfigCommand(CLI::App& app);  // cli/launch.cc: import-config FILE
RunFn AddValidateCommand(CLI::App& app);      // cli/validate.cc
RunFn AddCalibrateCommand(CLI::App& app);     // cli/calibrate.cc
RunFn AddTuneCommand(CLI::App& app);          // cli/tune.cc
RunFn AddServeCommand(CLI::App& app);         // cli/serve.cc
RunFn AddGenerateCommand(CLI::App& app);      // cli/generate.cc

// True when a launcher (mpirun, srun through PMIx) started this process (cli/train.cc).
bool UnderLauncher();

// Prints "pentamesh: error: <message>" to stderr and returns exit code 2.
int Fail(const std::string& message);

// Parses argv into `app` (whose subcommands are `commands`, in registration order) and runs the
// chosen one. Every user error exits 2: an unknown subcommand (named), and every CLI11 parse or
// validation error (flag named); --help and --version exit 0.
int Dispatch(CLI::App& app, const std::vector<std::pair<CLI::App*, RunFn>>& commands, int argc,
             const char* const* argv);

}  // namespace pentamesh::cli
