// Dispatch (cli/commands.h): the parse-and-run step shared by main.cc and the CLI fuzz target.
#include <fmt/format.h>

#include <string>

#include "cli/commands.h"

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
    if (sub->parsed()) return run();
  }
  return Fail("no subcommand given");
}

}  // namespace pentamesh::cli
