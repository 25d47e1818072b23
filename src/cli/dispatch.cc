// Dispatch (cli/commands.h): the parse-and-run step shared by main.cc and the CLI fuzz target.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <system_error>

#include "cli/commands.h"
#include "core/output.h"

namespace pentamesh::cli {

int Dispatch(CLI::App& app, const std::vector<std::pair<CLI::App*, RunFn>>& commands, int argc,
             const char* const* argv) {
  // An unknown first word is named (CLI11 alone would say "A subcommand is required").
  const bool named = argc > 1 && argv[1][0] != '-';
  if (named) {
    const std::string word = argv[1];
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      found = found || sub->get_name() == word;
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) return Fail(fmt::format("unknown subcommand '{}' (known: {})", word, known));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 through CLI11; every other parse error is a user error: exit 2
    // (CLI11's own codes 104-114 would break the documented contract).
    if (e.get_exit_code() == 0) return app.exit(e);
    return Fail(fmt::format("{} (see pentamesh {}--help)", e.what(),
                            named ? std::string(argv[1]) + " " : ""));
  }
  for (const auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    // The output layer's last check: everything printed reached stdout (a full disk, /dev/full,
    // a closed pipe are exit 2, never a silent 0). fmt::print throws when a write fails.
    int code = 0;
    try {
      code = run();
    } catch (const std::system_error& e) {
      if (!std::ferror(stdout)) throw;  // not a write to stdout
      return Fail(fmt::format("cannot write to standard output: {}", e.code().message()));
    } catch (const nlohmann::json::exception& e) {
      // Last line of defence: JSON readers go through spec/json_input.h, which names the key;
      // a value that still reaches nlohmann's throwing accessors is a user error, not an abort.
      return Fail(fmt::format("a JSON value of an unexpected type or size: {}", e.what()));
    }
    if (const core::Status out = core::FinishStdout(); !out.ok()) return Fail(out.message());
    return code;
  }
  return Fail("no subcommand given");
}

}  // namespace pentamesh::cli
