// What `export` and `generate` share on the command line: finding the checkpoint to read
// (--checkpoint PATH, or --config run.toml with --resume auto|PATH, as `train --resume` resolves
// it) and the SentencePiece tokenizer of the run (--tokenizer, else the one data.dataset was
// made with).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/status.h"
#include "train/run_config.h"

namespace pentamesh::cli {

struct CheckpointArgs {
  std::string checkpoint, config, resume;
  std::vector<std::string> sets;
};

// Adds --checkpoint, --config, --set and --resume to `sub`, filling `args`.
void AddCheckpointOptions(CLI::App* sub, CheckpointArgs* args);

// `command` names the subcommand in errors. When OK the optional holds the checkpoint.
core::Result<std::optional<ckpt::Checkpoint>> FindCheckpoint(const CheckpointArgs& args,
                                                             const char* command);

// `tokenizer` when given, else the tokenizer of run.data.dataset (error naming data.dataset and
// suggesting --tokenizer when it cannot be found).
core::Result<std::string> TokenizerPath(const std::string& tokenizer, const train::RunConfig& run,
                                        const std::string& fallback_hint);

// Prints "pentamesh: warning: <message>" to stderr.
void Warn(const std::string& message);

}  // namespace pentamesh::cli
