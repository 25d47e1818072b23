// import-config: which engine wrote a file, and reading a Megatron-LM script or command line
// (world size from --gpus, the script's #SBATCH lines, or an sbatch.sh beside it).
#include <fmt/format.h>

#include <filesystem>

#include "launch/internal.h"
#include "spec/limits.h"
#include "spec/load_toml.h"

namespace pentamesh::launch {
namespace internal {

core::Result<Imported> ImportMegatron(const std::string& name, const std::string& text,
                                      const std::string& dir, const ImportOptions& options) {
  PM_ASSIGN_OR_RETURN(Script script, ReadScript(name, text));
  const auto flags = CollectFlags(script.words);
  Imported out;
  out.engine = Engine::kMegatron;
  PM_RETURN_IF_ERROR(ReadMegatronFlags(name, flags, /*ds=*/false, options, out));
  std::optional<int64_t> world = options.gpus;
  std::string source = "--gpus";
  if (!world) {
    PM_ASSIGN_OR_RETURN(world, WorldFromScript(text, &out.gpus_per_node));
    source = name + "'s #SBATCH lines";
  }
  if (!world) {
    const std::filesystem::path sbatch = std::filesystem::path(dir) / "sbatch.sh";
    if (std::filesystem::exists(sbatch)) {
      PM_ASSIGN_OR_RETURN(std::string s, spec::ReadFile(sbatch.string()));
      PM_ASSIGN_OR_RETURN(world, WorldFromScript(s, &out.gpus_per_node));
      source = sbatch.string() + "'s #SBATCH lines";
    }
  }
  if (!world) {
    return core::Status::Error(
        fmt::format("{}: the script does not say how many GPUs it runs on (no #SBATCH --nodes and "
                    "--ntasks-per-node, no sbatch.sh beside it): pass --gpus",
                    name));
  }
  spec::Layout& l = out.layout;
  PM_ASSIGN_OR_RETURN(const int64_t model_par,
                      spec::GpuProduct(name + ": tp x pp x cp", {l.tp, l.pp, l.cp}));
  if (*world % model_par != 0) {
    return core::Status::Error(
        fmt::format("{}: world size {} (from {}) is not a multiple of tp x pp x cp = {}", name,
                    *world, source, model_par));
  }
  l.dp = *world / model_par;
  out.gpus = *world;
  if (out.train.global_batch_tokens == 0) {
    out.train.global_batch_tokens = l.mbs * l.dp * out.train.seq_len;
    out.notes.push_back("no --global-batch-size: Megatron's default, micro-batch x data-parallel");
  }
  return out;
}

}  // namespace internal

core::Result<Imported> ImportText(const std::string& name, const std::string& text,
                                  const std::string& dir, const ImportOptions& options) {
  std::optional<Engine> engine = options.engine;
  if (!engine) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    const bool toml = name.size() >= 5 && name.substr(name.size() - 5) == ".toml";
    if (first != std::string::npos && text[first] == '{') {
      engine = Engine::kDeepSpeed;
    } else if (toml || text.find("[parallelism]") != std::string::npos) {
      engine = Engine::kTorchtitan;
    } else if (text.find("--deepspeed") != std::string::npos) {
      engine = Engine::kDeepSpeed;
    } else if (text.find("--num-layers") != std::string::npos ||
               text.find("pretrain_gpt") != std::string::npos) {
      engine = Engine::kMegatron;
    } else {
      return core::Status::Error(fmt::format(
          "{}: cannot tell which engine this file is for (a Megatron-LM script, a torchtitan "
          "TOML, a DeepSpeed launch script or ds_config.json): pass --engine",
          name));
    }
  }
  switch (*engine) {
    case Engine::kMegatron:
      return internal::ImportMegatron(name, text, dir, options);
    case Engine::kTorchtitan:
      return internal::ImportTorchtitan(name, text, options);
    case Engine::kDeepSpeed:
      return internal::ImportDeepSpeed(name, text, dir, options);
  }
  return core::Status::Error("unknown engine");
}

core::Result<Imported> ImportConfig(const std::string& path, const ImportOptions& options) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ImportText(path, text, dir.empty() ? "." : dir, options);
}

}  // namespace pentamesh::launch
