// import-config: which engine wrote a file, and reading a Megatron-LM script or command line
// (world size from --gpus, the script's #SBATCH lines, or an sbatch.sh beside it).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "launch/internal.h"
#include "spec/limits.h"
#include "spec/load_toml.h"

namespace pentamesh::launch {
namespace internal {
namespace {

// Flags the engine's parser has that change what runs, but that pentamesh does not read: each
// becomes a note naming it, so the estimate's difference from the run has a named cause.
struct DroppedFlag {
  const char* flag;
  bool ds;  // Megatron-DeepSpeed's (else Megatron-LM's)
  const char* why;
};
constexpr DroppedFlag kDroppedFlags[] = {
    {"--fp8-param-gather", false, "the fp8 parameter all-gather is not modelled (costed in bf16)"},
    {"--mtp-num-layers", false,
     "multi-token-prediction layers are not part of the model pentamesh costs"},
    {"--decoder-first-pipeline-num-layers", false,
     "an uneven pipeline split is not carried (costed with pentamesh's split)"},
    {"--decoder-last-pipeline-num-layers", false,
     "an uneven pipeline split is not carried (costed with pentamesh's split)"},
    {"--pipeline-model-parallel-layout", false,
     "a custom pipeline layout is not carried (costed with pentamesh's split)"},
    {"--moe-router-score-function", false, "the router is costed as a softmax router"},
    {"--moe-router-num-groups", false, "group-limited routing is not modelled"},
    {"--moe-router-group-topk", false, "group-limited routing is not modelled"},
    {"--moe-router-enable-expert-bias", false,
     "the aux-loss-free expert bias is not modelled (the aux loss is)"},
    {"--tp-comm-overlap", false, "TP communication overlap follows the --stack profile"},
    {"--moe-shared-expert-overlap", false, "shared-expert overlap follows the --stack profile"},
    {"--overlap-moe-expert-parallel-comm", false,
     "EP all-to-all overlap follows the --stack profile ([defaults] ep_a2a_overlap)"},
    {"--cpu-optimizer", true, "the optimizer on the CPU is not modelled (costed on the GPU)"},
    {"--random-ltd", true, "random layer token drop is not modelled"},
    {"--num-experts-switch", true, "Megatron-LM's switch MLP is not read (DeepSpeed-MoE is)"},
    {"--mlp-type", true, "only the standard MoE (not residual PR-MoE) is modelled"},
};

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// " (did you mean --x?)" for the closest known flag within 3 edits, else "".
std::string Suggestion(const std::string& flag, const std::set<std::string>& known) {
  size_t best = 4;
  std::string name;
  for (const std::string& k : known) {
    const size_t d = EditDistance(flag, k);
    if (d < best) {
      best = d;
      name = k;
    }
  }
  return name.empty() ? std::string() : fmt::format(" (did you mean {}?)", name);
}

}  // namespace

std::string LinePrefix(int line) { return line > 0 ? fmt::format("line {}: ", line) : ""; }

core::Status WithFallback(const Script& script, core::Status status) {
  if (status.ok() || script.fallback.empty()) return status;
  return core::Status::Error(fmt::format("{} (read with pentamesh's own shell reader: {})",
                                         status.message(), script.fallback));
}

std::set<std::string> FlagNames(const char* table) {
  std::set<std::string> names;
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find('\t')));
  }
  return names;
}

const std::set<std::string>& ParserFlagNames(bool ds) {
  static const std::set<std::string> megatron = FlagNames(kMegatronFlagTable);
  static const std::set<std::string> deepspeed = FlagNames(kMegatronDeepSpeedFlagTable);
  return ds ? deepspeed : megatron;
}

core::Status CheckParserFlags(const std::string& name, const std::vector<Word>& argv, bool ds,
                              const ImportOptions& options, Imported& out) {
  const std::set<std::string>& known = ParserFlagNames(ds);
  const char* parser =
      ds ? "Megatron-DeepSpeed's parser (commit f4157be)" : "Megatron-LM's parser (core_v0.16.1)";
  std::vector<std::string> unknown;
  for (const auto& [flag, value] : CollectFlags(argv)) {
    if (known.count(flag) == 0) {
      unknown.push_back(
          fmt::format("{}{}{}", LinePrefix(value.line), flag, Suggestion(flag, known)));
      continue;
    }
    for (const DroppedFlag& d : kDroppedFlags) {
      if (d.ds == ds && flag == d.flag) {
        out.notes.push_back(fmt::format("dropped {}{}: {}", flag,
                                        value.line > 0 ? fmt::format(" (line {})", value.line) : "",
                                        d.why));
      }
    }
  }
  if (unknown.empty()) return core::Status::Ok();
  std::string list;
  for (const std::string& u : unknown) list += (list.empty() ? "" : "; ") + u;
  if (!options.allow_unknown) {
    return core::Status::Error(fmt::format(
        "{}: {} not in {}, which refuses unknown flags: {} (pass --allow-unknown to import "
        "without them)",
        name, unknown.size() == 1 ? "a flag is" : "flags are", parser, list));
  }
  out.warnings.push_back(fmt::format("{}: ignored, not in {}: {}", name, parser, list));
  return core::Status::Ok();
}

namespace {

// A launcher flag's first value as a positive integer; nullopt when absent or not a number (a
// value only known at run time).
std::optional<int64_t> LauncherInt(const std::map<std::string, FlagValue>& flags,
                                   std::initializer_list<const char*> names) {
  for (const char* f : names) {
    auto it = flags.find(f);
    if (it == flags.end() || it->second.values.empty()) continue;
    auto v = spec::ParseInt(f, it->second.values[0], 1);
    if (v.ok()) return *v;
  }
  return std::nullopt;
}

}  // namespace

core::Result<std::optional<ScriptWorldSize>> ScriptWorld(
    const std::string& name, const std::string& text, const std::string& dir,
    const std::map<std::string, FlagValue>& flags, const ImportOptions& options, Imported& out) {
  if (options.gpus) return std::optional<ScriptWorldSize>(ScriptWorldSize{*options.gpus, "--gpus"});
  PM_ASSIGN_OR_RETURN(std::optional<int64_t> world, WorldFromScript(text, &out.gpus_per_node));
  if (world)
    return std::optional<ScriptWorldSize>(ScriptWorldSize{*world, name + "'s #SBATCH lines"});
  const std::filesystem::path sbatch = std::filesystem::path(dir) / "sbatch.sh";
  if (std::filesystem::exists(sbatch)) {
    PM_ASSIGN_OR_RETURN(std::string s, spec::ReadFile(sbatch.string()));
    PM_ASSIGN_OR_RETURN(world, WorldFromScript(s, &out.gpus_per_node));
    if (world)
      return std::optional<ScriptWorldSize>(
          ScriptWorldSize{*world, sbatch.string() + "'s #SBATCH lines"});
  }
  // The launchers' own flags, their first word each (the published examples: torchrun
  // --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES; deepspeed --num_gpus 8 --num_nodes 1).
  // Not guessed where the node count is the allocation's ($SLURM_NNODES, known only at run time),
  // an elastic range (--nnodes 1:4) or a hostfile's.
  const bool from_allocation = text.find("SLURM_NNODES") != std::string::npos ||
                               text.find("SLURM_JOB_NUM_NODES") != std::string::npos;
  if (from_allocation) return std::optional<ScriptWorldSize>();
  // One launcher's nodes x GPUs per node, when both are known.
  auto launcher = [&](std::optional<int64_t> nodes, std::optional<int64_t> per_node,
                      const std::string& what) -> core::Result<std::optional<ScriptWorldSize>> {
    if (!nodes || !per_node) return std::optional<ScriptWorldSize>();
    PM_ASSIGN_OR_RETURN(const int64_t w, spec::GpuProduct(name + ": " + what, {*nodes, *per_node}));
    out.gpus_per_node = *per_node;
    return std::optional<ScriptWorldSize>(ScriptWorldSize{w, what});
  };
  PM_ASSIGN_OR_RETURN(std::optional<ScriptWorldSize> torchrun,
                      launcher(LauncherInt(flags, {"--nnodes"}),
                               LauncherInt(flags, {"--nproc_per_node", "--nproc-per-node"}),
                               "torchrun's --nnodes x --nproc_per_node"));
  if (torchrun) return torchrun;
  // DeepSpeed's launcher: --num_gpus per node; without --num_nodes or a hostfile it runs on this
  // node alone.
  const bool hostfile = flags.count("--hostfile") > 0 || flags.count("--include") > 0;
  std::optional<int64_t> ds_nodes = LauncherInt(flags, {"--num_nodes", "--num-nodes"});
  if (!ds_nodes && !hostfile) ds_nodes = 1;
  return launcher(ds_nodes, LauncherInt(flags, {"--num_gpus", "--num-gpus"}),
                  "deepspeed's --num_nodes x --num_gpus");
}

core::Result<Imported> ImportMegatron(const std::string& name, const std::string& text,
                                      const std::string& dir, const ImportOptions& options) {
  Imported out;
  out.engine = Engine::kMegatron;
  PM_ASSIGN_OR_RETURN(const Script script, EvaluateScript(name, text, dir, options, out));
  PM_RETURN_IF_ERROR(WithFallback(
      script, CheckParserFlags(name, EntryArgv(script, nullptr), false, options, out)));
  const auto flags = CollectFlags(script.words);
  PM_RETURN_IF_ERROR(
      WithFallback(script, ReadMegatronFlags(name, flags, /*ds=*/false, options, out)));
  PM_ASSIGN_OR_RETURN(const std::optional<ScriptWorldSize> found,
                      ScriptWorld(name, text, dir, flags, options, out));
  if (!found) {
    return core::Status::Error(
        fmt::format("{}: the script does not say how many GPUs it runs on (no #SBATCH --nodes and "
                    "--ntasks-per-node, no sbatch.sh beside it, no torchrun --nnodes and "
                    "--nproc_per_node, no deepspeed --num_gpus): pass --gpus",
                    name));
  }
  const std::optional<int64_t> world = found->gpus;
  const std::string& source = found->source;
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

void CostAsImported(const Imported& im, cost::CostParams& params) {
  if (im.ep_dispatch_per_node) params.ep_dispatch_per_node = *im.ep_dispatch_per_node;
  if (im.pp_p2p_overlap) params.pp_p2p_overlap = *im.pp_p2p_overlap;
}

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
