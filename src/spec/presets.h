// The built-in presets: configs/presets/<kind>/<name>.toml, compiled into the binary by CMake
// (pm_embed_text, cmake/embed_text.cmake) so a preset works from any directory.
#pragma once

#include <string_view>

namespace pentamesh::spec {

struct PresetFile {
  std::string_view kind;  // "models", "clusters", "train", "recipes", "stacks"
  std::string_view name;  // file name without .toml
  std::string_view text;
};

extern const PresetFile kPresets[];
extern const int kPresetCount;

}  // namespace pentamesh::spec
