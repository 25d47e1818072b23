#include "cli/checkpoint_args.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/input.h"
#include "data/dataset.h"

namespace pentamesh::cli {

void AddCheckpointOptions(CLI::App* sub, CheckpointArgs* args) {
  sub->add_option("--checkpoint", args->checkpoint,
                  "a checkpoint directory, or a checkpoint root with `latest`");
  sub->add_option("--config", args->config, "run TOML whose ckpt.dir holds the checkpoint");
  sub->add_option("--set", args->sets, "override a key of --config (repeatable)");
  sub->add_option("--resume", args->resume, "with --config: auto (default) or a checkpoint path");
}

namespace fs = std::filesystem;

void Warn(const std::string& message) { fmt::print(stderr, "pentamesh: warning: {}\n", message); }

core::Result<std::optional<ckpt::Checkpoint>> FindCheckpoint(const CheckpointArgs& args,
                                                             const char* command) {
  std::string spec = args.checkpoint, root;
  if (spec.empty()) {
    if (args.config.empty())
      return core::Status::Error(
          fmt::format("{}: give --checkpoint PATH or --config run.toml", command));
    PM_ASSIGN_OR_RETURN(train::RunConfig config, train::LoadRunConfig(args.config, args.sets));
    spec = args.resume.empty() ? "auto" : args.resume;
    root = config.ckpt.dir;
  }
  auto found = ckpt::ResolveResume(spec, root, Warn);
  if (found.ok() && !found->has_value())
    return core::Status::Error(
        fmt::format("ckpt.dir: no complete checkpoint under '{}' to {}", root, command));
  return found;
}

core::Result<std::string> TokenizerPath(const std::string& tokenizer, const train::RunConfig& run,
                                        const std::string& fallback_hint) {
  if (!tokenizer.empty()) return tokenizer;
  const std::string manifest = (fs::path(run.data.dataset) / "manifest.json").string();
  const auto text = core::ReadInputFile(manifest, core::kMaxConfigFileBytes, "dataset manifest");
  auto m = text.ok() ? data::ManifestFromJson(*text, manifest)
                     : core::Result<data::Manifest>(text.status());
  if (!m.ok() || !fs::exists(m->tokenizer_path))
    return core::Status::Error(fmt::format(
        "data.dataset: cannot find the run's tokenizer through {} ({}); pass --tokenizer "
        "FILE.model{}",
        manifest, m.ok() ? "tokenizer " + m->tokenizer_path + " is missing" : m.status().message(),
        fallback_hint));
  return m->tokenizer_path;
}

}  // namespace pentamesh::cli
