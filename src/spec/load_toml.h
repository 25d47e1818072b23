// Loading specs from TOML text, TOML files and built-in presets.
// A name without '/' and without ".toml" is a preset ("llama3-8b"); anything else is a file path.
// One file may hold [model], [cluster] and [train] tables together; each loader reads its table.
// Every error names the source, the field and the reason; all field errors are reported at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "spec/cluster_spec.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::spec {

// `source` names the text in error messages (a path or "preset llama3-8b").
core::Result<ModelSpec> ModelFromTomlText(const std::string& text, const std::string& source);
core::Result<ClusterSpec> ClusterFromTomlText(const std::string& text, const std::string& source);
core::Result<TrainSpec> TrainFromTomlText(const std::string& text, const std::string& source);

core::Result<ModelSpec> LoadModel(const std::string& preset_or_path);
// gpus, when given, overrides the node count: nodes = gpus / gpus_per_node (a single partial node
// when gpus < gpus_per_node and divides it).
core::Result<ClusterSpec> LoadCluster(const std::string& preset_or_path,
                                      std::optional<int64_t> gpus = std::nullopt);
core::Result<TrainSpec> LoadTrain(const std::string& preset_or_path);

// Sets the GPU count of a cluster, as --gpus does.
core::Status SetGpuCount(ClusterSpec& cluster, int64_t gpus);

// Reads a whole file; the error names the path and the OS reason.
core::Result<std::string> ReadFile(const std::string& path);

// Built-in presets: kind is "models", "clusters", "train" or "recipes".
std::vector<std::string> PresetNames(const std::string& kind);
std::optional<std::string> PresetText(const std::string& kind, const std::string& name);

}  // namespace pentamesh::spec
