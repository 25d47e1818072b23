// `pentamesh export --hf DIR (--checkpoint PATH | --config run.toml [--resume auto|PATH])`:
// writes a checkpoint's model as a Hugging Face directory (Llama for dense, Mixtral or Qwen2-MoE
// for MoE; ckpt/hf.h), with the SentencePiece tokenizer of the run's dataset.
// `pentamesh import --hf DIR --out CKPT_ROOT --config run.toml`: reads such a directory into a
// pentamesh checkpoint (step 0, fresh Adam state, the run's data position 0) that
// `pentamesh train --config run.toml --resume CKPT_ROOT` continues from.
// Invariant: export then import gives back the checkpoint's fp32 weights bitwise.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "cli/checkpoint_args.h"
#include "cli/commands.h"
#include "data/dataset.h"
#include "train/checkpoint_state.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace pentamesh::cli {
namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string hf_dir, tokenizer;
  CheckpointArgs source;
  bool no_tokenizer = false;
  int64_t max_shard_mb = 4096;
};

int RunExport(const ExportArgs& args) {
  auto found = FindCheckpoint(args.source, "export");
  if (!found.ok()) return Fail(found.status().message());
  const ckpt::Checkpoint& ck = **found;
  auto run = train::RunConfigOfCheckpoint(ck);
  if (!run.ok()) return Fail(run.status().message());
  const spec::ModelSpec& model = run->model;
  auto tokenizer = args.no_tokenizer ? core::Result<std::string>(std::string())
                                     : TokenizerPath(args.tokenizer, *run, " or --no-tokenizer");
  if (!tokenizer.ok()) return Fail(tokenizer.status().message());
  if (model.is_moe() && model.moe.capacity_factor > 0)
    Warn(fmt::format(
        "model.moe.capacity_factor={} drops assignments beyond an expert's capacity in "
        "training; Hugging Face's MoE is dropless, so its logits equal pentamesh's only where "
        "no assignment is dropped",
        model.moe.capacity_factor));
  auto source = [&](const std::string& name,
                    const std::vector<int64_t>& shape) -> core::Result<std::vector<float>> {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> out(static_cast<size_t>(n));
    PM_RETURN_IF_ERROR(
        ck.ReadRegion(name, shape, std::vector<int64_t>(shape.size(), 0), shape, out.data()));
    return out;
  };
  auto files = ckpt::ExportHf(model, source,
                              {.dir = args.hf_dir,
                               .tokenizer_model = *tokenizer,
                               .max_shard_bytes = args.max_shard_mb << 20});
  if (!files.ok()) return Fail(files.status().message());
  fmt::print("exported {} (step {}) as {} to {}: {}\n", ck.dir(), ck.step(),
             ckpt::HfArchName(ckpt::HfArchOf(model)), args.hf_dir, fmt::join(*files, ", "));
  return 0;
}

struct ImportArgs {
  std::string hf_dir, out, config;
  std::vector<std::string> sets;
};

core::Status Import(const ImportArgs& args) {
  if (fs::exists(fs::path(args.out) / "latest") || !ckpt::ListCheckpoints(args.out).empty())
    return core::Status::Error(
        fmt::format("--out {}: already holds checkpoints; import into a new directory", args.out));
  PM_ASSIGN_OR_RETURN(train::RunConfig config, train::LoadRunConfig(args.config, args.sets));
  PM_ASSIGN_OR_RETURN(ckpt::HfModel hf, ckpt::ImportHf(args.hf_dir));
  for (const std::string& w : hf.warnings) fmt::print(stderr, "pentamesh: warning: {}\n", w);
  PM_RETURN_IF_ERROR(ckpt::CheckSameArchitecture(hf.model, config.model,
                                                 (fs::path(args.hf_dir) / "config.json").string()));
  // The import runs on one process: a checkpoint loads into any layout (resharding on read).
  config.run.layout = spec::Layout{};
  PM_ASSIGN_OR_RETURN(auto trainer, train::Trainer::Create(config, {}));
  PM_RETURN_IF_ERROR(ckpt::LoadHfIntoParams(hf, trainer->params()));
  PM_RETURN_IF_ERROR(
      ckpt::SaveCheckpoint({.root = args.out, .keep = 1, .env = nullptr, .all_ok = {}},
                           train::TrainerSnapshot(*trainer)));
  fmt::print(
      "imported {} ({}, {} parameters) into {}/{}; continue with: pentamesh train --config {} "
      "--resume {}\n",
      args.hf_dir, hf.model.is_moe() ? "MoE" : "dense", trainer->params().numel(), args.out,
      ckpt::StepDirName(0), args.config, args.out);
  return core::Status::Ok();
}

}  // namespace

RunFn AddExportCommand(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "export",
      "Write a checkpoint as a Hugging Face model (Llama dense, Mixtral or Qwen2-MoE) + tokenizer");
  auto args = std::make_shared<ExportArgs>();
  sub->add_option("--hf", args->hf_dir, "output directory (config.json, model.safetensors, ...)")
      ->required();
  AddCheckpointOptions(sub, &args->source);
  sub->add_option("--tokenizer", args->tokenizer,
                  "SentencePiece .model (default: the tokenizer of the run's data.dataset)");
  sub->add_flag("--no-tokenizer", args->no_tokenizer, "write the model without a tokenizer");
  sub->add_option("--max-shard-mb", args->max_shard_mb,
                  "largest safetensors file; bigger models are sharded with an index")
      ->check(CLI::PositiveNumber);
  return [args]() { return RunExport(*args); };
}

RunFn AddImportCommand(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "import", "Read a Hugging Face model directory into a checkpoint that train --resume uses");
  auto args = std::make_shared<ImportArgs>();
  sub->add_option("--hf", args->hf_dir,
                  "Hugging Face model directory (llama, mixtral or qwen2_moe)")
      ->required();
  sub->add_option("--out", args->out, "new checkpoint root (gets step-00000000 and latest)")
      ->required();
  sub->add_option("--config", args->config,
                  "the run TOML to continue with: its [model] must match config.json")
      ->required();
  sub->add_option("--set", args->sets, "override a key of --config (repeatable)");
  return [args]() {
    const core::Status st = Import(*args);
    return st.ok() ? 0 : Fail(st.message());
  };
}

}  // namespace pentamesh::cli
