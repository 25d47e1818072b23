// `pentamesh presets [KIND [NAME]]`: lists the built-in presets, or prints one as TOML to copy.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "spec/load_toml.h"

namespace pentamesh::cli {

int Fail(const std::string& message) {
  std::fprintf(stderr, "pentamesh: error: %s\n", message.c_str());
  return 2;
}

RunFn AddPresetsCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("presets", "List built-in presets, or print one as TOML");
  auto kind = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  sub->add_option("kind", *kind, "models, clusters, train or recipes");
  sub->add_option("name", *name, "preset to print");
  return [kind, name]() -> int {
    const std::vector<std::string> kinds = {"models", "clusters", "train", "recipes"};
    if (kind->empty()) {
      for (const auto& k : kinds) {
        fmt::print("{}:", k);
        for (const auto& n : spec::PresetNames(k)) fmt::print(" {}", n);
        fmt::print("\n");
      }
      return 0;
    }
    if (std::find(kinds.begin(), kinds.end(), *kind) == kinds.end()) {
      return Fail(
          fmt::format("presets: kind '{}' is not one of models, clusters, train, recipes", *kind));
    }
    if (name->empty()) {
      for (const auto& n : spec::PresetNames(*kind)) fmt::print("{}\n", n);
      return 0;
    }
    auto text = spec::PresetText(*kind, *name);
    if (!text) return Fail(fmt::format("presets: no {} preset named '{}'", *kind, *name));
    fmt::print("{}", *text);
    return 0;
  };
}

}  // namespace pentamesh::cli
