// Shared by `plan` and `estimate`: --emit ENGINE --out DIR and writing the emitted files, and the
// command line (recorded by main.cc) for the emitted files' header. Defined in cli/launch.cc,
// beside `import-config`.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "cost/cost.h"
#include "launch/launch.h"

namespace pentamesh::cli {

// The process's command line, as typed (main.cc records it).
void SetCommandLine(int argc, char** argv);
const std::string& CommandLine();

// The --stack profile plan and estimate cost with: --stack when given, else the engine's own when
// --emit/--engine names one (launch::ChooseStack), else calib::kDefaultStack; with the reason.
launch::StackChoice StackFor(const std::string& given, std::optional<launch::Engine> engine);

struct EmitArgs {
  std::string engine;  // --emit
  std::string out;     // --out
};
// Adds --emit and --out.
void AddEmitOptions(CLI::App& sub, EmitArgs& args);
// Checks --emit/--out (both or neither); the error names the option.
core::Status CheckEmitArgs(const EmitArgs& args);
// Emits and writes the files, printing their paths to stderr (stdout stays the command's own).
// Returns 0, or Fail()'s code with the refusal or the error.
int EmitAndWrite(const EmitArgs& args, const launch::EmitInput& in);

}  // namespace pentamesh::cli
