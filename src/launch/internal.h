// Shared by the per-engine emitters and importers of launch/ (not part of its interface).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launch/launch.h"

namespace pentamesh::launch::internal {

// The comment block every emitted file starts with: version, command, layout, prediction.
// `prefix` is the comment marker ("# ").
std::string Header(Engine engine, const EmitInput& in, const std::string& prefix);
// Iterations of the whole run: ceil(total_tokens / global_batch_tokens), at least 1.
int64_t TrainIters(const spec::TrainSpec& train);
// Nodes and GPUs per node of the run (a single partial node when gpus < gpus_per_node).
int64_t Nodes(const EmitInput& in);
int64_t GpusPerNode(const EmitInput& in);
// The sbatch script that starts `per_task` once per GPU with srun (RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT exported for torch.distributed's env:// rendezvous).
std::string Sbatch(Engine engine, const EmitInput& in, const std::string& per_task);
// The #SBATCH lines (nodes, tasks_per_node tasks and all GPUs of each node, exclusive) and the
// rendezvous exports, without the srun line.
std::string SbatchPreamble(Engine engine, const EmitInput& in, int64_t tasks_per_node);

// Megatron's --moe-layer-freq: an integer k (every k-th layer) or a Python list expression.
std::string MoeLayerFreq(const spec::ModelSpec& model);

// The model, sequence and parallel flags shared by Megatron-LM and Megatron-DeepSpeed, as
// (flag, value) pairs; value "" is a switch.
using Flags = std::vector<std::pair<std::string, std::string>>;

// Megatron-LM's (ds = false) or Megatron-DeepSpeed's (ds = true) flags: model and sequence;
// parallelism, recomputation, batch and precision; the training loop. FlagArray writes a bash
// array NAME=( ... ) of them, each flag and value one word through core::ShellQuote (literal),
// except kCheckpointDirRef, written "${CHECKPOINT_DIR}" (the script's variable, expanded).
inline constexpr const char* kCheckpointDirRef = "${CHECKPOINT_DIR}";
// per_node_dispatch: Megatron's flex dispatcher with DeepEP instead of the all-to-all.
Flags MegatronModelFlags(const spec::ModelSpec& m, const spec::TrainSpec& t, bool ds,
                         bool per_node_dispatch = false);
// The profile's per-node MoE dispatch applies to this launch: an MoE model with ep > 1.
inline bool PerNodeDispatch(const EmitInput& in) {
  return in.ep_dispatch_per_node && in.model.is_moe() && in.layout.ep > 1;
}
// The profile's EP all-to-all overlap applies to this launch: an MoE model on a layout where
// Megatron-Core runs it (spec::EpOverlapRuns).
inline bool EpOverlap(const EmitInput& in) {
  return in.ep_overlap && in.model.is_moe() && spec::EpOverlapRuns(in.layout);
}
Flags MegatronParallelFlags(const spec::ModelSpec& m, const spec::TrainSpec& t,
                            const spec::Layout& l, bool ds);
Flags TrainingLoopFlags(const spec::TrainSpec& t, bool ds);
std::string FlagArray(const std::string& name, const Flags& flags);
// Layers fewer than n in the first (2) and last (>= 1) pipeline chunk (spec::ChunkLayers).
int64_t SplitDeficit(const spec::ModelSpec& m, const spec::Layout& l);

// A shell script or command line read as words, with simple variables resolved: NAME=value
// assignments of the file, ${NAME:-default}, and arrays NAME=( ... ) expanded where "${NAME[@]}"
// is used. Comments and line continuations are removed. Each word keeps its line number.
struct Word {
  std::string text;
  int line = 0;
  int command = 0;  // which command of the script (1, 2, ...) the word belongs to
};
// A sandbox's temporary directory, removed with the last Script that refers to it.
struct SandboxDir {
  std::string path;
  SandboxDir() = default;
  SandboxDir(const SandboxDir&) = delete;
  SandboxDir& operator=(const SandboxDir&) = delete;
  ~SandboxDir();
};
struct Script {
  std::vector<Word> words;                  // every word of every command, in order
  std::map<std::string, std::string> vars;  // scalar assignments
  // When bash evaluated the script: the launcher's working directory (files the script wrote,
  // such as a heredoc ds_config, are read from there) and the sandbox that holds it.
  std::string cwd;
  std::shared_ptr<SandboxDir> sandbox;
  std::string fallback;  // why bash's reading was not used, when it ran ("" otherwise)
};
core::Result<Script> ReadScript(const std::string& name, const std::string& text);
// A training entry point: a word whose file name is pretrain_*.py.
bool IsEntryWord(const std::string& text);
// The arguments of the training entry point (the words after pretrain_*.py in its command), with
// the entry's word in *entry; all words when the script runs no pretrain_*.py (a bare flag list).
std::vector<Word> EntryArgv(const Script& script, std::string* entry);

// Running a launch script under bash (sandbox.cc): how well the host isolates it.
enum class Isolation { kReadOnly, kNoNetwork, kNone };
const char* ToString(Isolation level);
// One process a stand-in replaced: its working directory and argv (argv[0] the command's name).
struct LaunchRecord {
  std::string cwd;
  std::vector<std::string> argv;
};
struct ScriptRun {
  std::vector<LaunchRecord> records;  // in the order the processes started
  Isolation isolation = Isolation::kNone;
  bool ran = false;     // false: not run, the isolation was weaker than required
  std::string outcome;  // "exit status 0" or what stopped it, with the output's last lines
  std::shared_ptr<SandboxDir> dir;
};
// Runs the script (the file `name` when it holds `text`, else text written into the sandbox)
// under bash with recording stand-ins for the launchers (torchrun, python, deepspeed, srun,
// mpirun, sbatch, ...), HOME/TMPDIR/working directory in a temporary directory, stdin
// /dev/null, its own process group killed after timeout_s, and the isolation the host allows.
// `dir` is the script's directory (the working directory's contents under kReadOnly). With
// require_read_only the script is not run (ran = false) on a host without that isolation.
core::Result<ScriptRun> RunScriptSandboxed(const std::string& name, const std::string& text,
                                           const std::string& dir, double timeout_s,
                                           bool require_read_only);
// The script as words: the launcher's argv recorded by bash (options.shell, notes saying which
// reader and isolation), else ReadScript's reading.
core::Result<Script> EvaluateScript(const std::string& name, const std::string& text,
                                    const std::string& dir, const ImportOptions& options,
                                    Imported& out);

// "line N: ", or "" for line 0 (a word bash assembled that no line of the script names).
std::string LinePrefix(int line);
// status, with why bash's reading was not used appended when the script fell back to ReadScript.
core::Status WithFallback(const Script& script, core::Status status);

// Flags of a command line: "--flag" -> values (words up to the next "--flag"), with the line of
// the flag. A later flag replaces an earlier one (argparse's rule).
struct FlagValue {
  std::vector<std::string> values;
  int line = 0;
};
std::map<std::string, FlagValue> CollectFlags(const std::vector<Word>& words);

// The engines' parsers' flag lists (src/launch/data/*.tsv, compiled in): flag, switch|value,
// type, nargs, choices per line.
extern const char* const kMegatronFlagTable;
extern const char* const kMegatronDeepSpeedFlagTable;
// torchtitan 0.2.2's job-config keys (section.key, one a line; src/launch/data).
extern const char* const kTorchtitanKeyTable;
// DeepSpeed 0.19.8's ds_config keys (dotted, one a line; src/launch/data, built by
// scripts/deepspeed_config_keys.py): the top-level keys DeepSpeedConfig reads, and the fields of
// the sections its pydantic models check.
extern const char* const kDeepSpeedConfigKeyTable;
// The first column of each line of a compiled-in table (the flag names of a flag table, the keys
// of a key table), '#' lines skipped.
std::set<std::string> FlagNames(const char* table);
// The flags of Megatron-LM's (ds = false) or Megatron-DeepSpeed's parser.
const std::set<std::string>& ParserFlagNames(bool ds);
// Flags of argv the engine's parser does not have: an error naming each (with the closest known
// flag) unless options.allow_unknown, then a warning in out.warnings. Flags the parser has but
// pentamesh does not model (kDroppedFlags) become notes.
core::Status CheckParserFlags(const std::string& name, const std::vector<Word>& argv, bool ds,
                              const ImportOptions& options, Imported& out);

// Megatron-style model and parallel flags into model/train/layout; shared by the Megatron-LM and
// Megatron-DeepSpeed importers. `ds` selects Megatron-DeepSpeed's flag names.
core::Status ReadMegatronFlags(const std::string& name,
                               const std::map<std::string, FlagValue>& flags, bool ds,
                               const ImportOptions& options, Imported& out);

// World size from the #SBATCH directives (--nodes x --gpus-per-node or --ntasks-per-node) of a
// script text; *per_node is set to the GPUs per node they name.
core::Result<std::optional<int64_t>> WorldFromScript(const std::string& text,
                                                     std::optional<int64_t>* per_node);

// The world size of a launch script, and what said it: --gpus; the script's #SBATCH lines, or an
// sbatch.sh's beside it (in `dir`); the launcher flags among `flags` (torchrun's --nnodes x
// --nproc_per_node, deepspeed's --num_nodes x --num_gpus); nullopt when nothing says it. Sets
// out.gpus_per_node where the source names it.
struct ScriptWorldSize {
  int64_t gpus = 0;
  std::string source;
};
core::Result<std::optional<ScriptWorldSize>> ScriptWorld(
    const std::string& name, const std::string& text, const std::string& dir,
    const std::map<std::string, FlagValue>& flags, const ImportOptions& options, Imported& out);

std::vector<File> EmitMegatron(const EmitInput& in);
std::vector<File> EmitTorchtitan(const EmitInput& in);
std::vector<File> EmitDeepSpeed(const EmitInput& in);
core::Result<Imported> ImportMegatron(const std::string& name, const std::string& text,
                                      const std::string& dir, const ImportOptions& options);
core::Result<Imported> ImportTorchtitan(const std::string& name, const std::string& text,
                                        const ImportOptions& options);
core::Result<Imported> ImportDeepSpeed(const std::string& name, const std::string& text,
                                       const std::string& dir, const ImportOptions& options);

}  // namespace pentamesh::launch::internal
