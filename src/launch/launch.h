// launch/: from a pentamesh layout to the files a user submits to Megatron-LM, torchtitan or
// DeepSpeed, and back (import-config). Each engine has its own file (megatron.cc, torchtitan.cc,
// deepspeed.cc); what each engine can run is one table of rules (capability.cc).
//
// Expert placement (spec/layout.h) on the engines, which all fold EP into their data-parallel
// ranks (Megatron's "MoE parallel folding", torchtitan's EP borrowing from dp_shard x cp,
// DeepSpeed-MoE's expert groups carved from the data-parallel group):
//   folded   dp, ep      -> engine DP = dp,      EP = ep (ep divides dp * cp)
//   separate dp, ep      -> engine DP = dp * ep, EP = ep (the same run: dense weights replicated
//                           over dp * ep * cp, experts over dp * cp)
// so import-config gives folded back; round trips compare layouts through CanonicalForEngines.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "cost/cost.h"
#include "plan/allow.h"
#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::launch {

enum class Engine { kMegatron, kTorchtitan, kDeepSpeed };
inline constexpr Engine kEngines[] = {Engine::kMegatron, Engine::kTorchtitan, Engine::kDeepSpeed};

const char* ToString(Engine engine);  // "megatron", "torchtitan", "deepspeed"
// The error names the option and the known engines.
core::Result<Engine> ParseEngine(const std::string& option, const std::string& name);

// One row of the capability table: a layout violates the rule when it matches every clause of
// `when` (--allow syntax; empty = always) and fails a clause of `require`, or when `check` (for
// rules across fields that clauses cannot say) returns false.
struct CapabilityRule {
  const char* id;
  Engine engine;
  const char* when;
  const char* require;
  bool (*check)(const spec::ModelSpec& model, const spec::Layout& layout);
  const char* message;
};
std::span<const CapabilityRule> CapabilityTable();

// What each engine does with each of pentamesh's schedules (schedule/table.h): runs it under its
// own name (torchtitan's pipeline_parallel_schedule; Megatron-LM's and DeepSpeed's schedule the
// flags select), or refuses it by the rule `refused_by` of the table above (name nullptr). A
// schedule without a row for an engine is refused by the engine's "-unknown-schedule" rule: a
// new schedule runs on an engine only once a row here says how.
struct EngineSchedule {
  Engine engine;
  spec::Schedule schedule;
  const char* name;        // nullptr: refused
  const char* refused_by;  // the rule id, when refused
};
std::span<const EngineSchedule> EngineSchedules();
// The row of (engine, schedule); nullptr when there is none.
const EngineSchedule* FindEngineSchedule(Engine engine, spec::Schedule schedule);

// Rules of `engine` the layout violates (empty: the engine can run it).
std::vector<const CapabilityRule*> Violations(Engine engine, const spec::ModelSpec& model,
                                              const spec::Layout& layout);
// "rule tt-no-ulysses: torchtitan ... " for each violation, one per line.
std::string DescribeViolations(Engine engine, const std::vector<const CapabilityRule*>& rules);

// Restricts the planner's space to what `engine` can run (adds a filter to options.allow).
void RestrictToEngine(Engine engine, const spec::ModelSpec& model, plan::Constraints& allow);

// The --stack profile (cost calibration) that applies to runs on this engine.
const char* StackProfile(Engine engine);

// The --stack profile a run on `engine` is costed with, and why: `given` (--stack, a preset name
// or a profile TOML) when not empty, else the engine's own (StackProfile). plan and estimate with
// --emit/--engine choose and cost with it, every emitted header names it with the reason, and
// import-config costs an imported file with it (its --stack overrides, as for plan).
struct StackChoice {
  std::string profile;  // what --stack would say
  std::string reason;   // "torchtitan's own profile (no --stack given)" or "--stack megatron"
};
StackChoice ChooseStack(const std::string& given, Engine engine);

// Expert-tensor-parallel degree the engines are given. Today the layout has none (experts are
// split over tp like the dense layers), so it is tp.
int64_t ExpertTensorParallel(const spec::Layout& layout);

// The engines' data-parallel degree (the ranks that read different sequences) and the layout
// with EP folded the engines' way: separate (dp, ep) becomes folded (dp * ep, ep).
int64_t EngineDataParallel(const spec::Layout& layout);
spec::Layout CanonicalForEngines(const spec::Layout& layout);

struct EmitInput {
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  spec::TrainSpec train;
  spec::Layout layout;
  cost::Estimate estimate;  // the cost model's prediction for layout (printed in the header)
  std::string command;      // the pentamesh command line that produced it
  StackChoice stack = {};   // the profile the estimate used (empty: the engine's own)
  // The profile's MoE dispatcher (cost::CostParams::ep_dispatch_per_node): Megatron gets the flex
  // dispatcher with DeepEP, which the estimate costed; the other engines have none and refuse.
  bool ep_dispatch_per_node = false;
  // The profile's EP all-to-all overlap (cost::CostParams::ep_overlap > 0): Megatron gets
  // --overlap-moe-expert-parallel-comm where the layout lets it run (spec::EpOverlapRuns), as the
  // estimate costed; the other engines have none and refuse.
  bool ep_overlap = false;
};

struct File {
  std::string name;  // relative to the output directory
  std::string text;
  bool executable = false;
};

// The files to submit. Refuses (error naming each violated rule) what the engine cannot run.
core::Result<std::vector<File>> Emit(Engine engine, const EmitInput& in);
// Writes the files into dir (created if missing); the error names the path.
core::Status WriteFiles(const std::string& dir, const std::vector<File>& files);

// What import-config read from an engine's config.
struct Imported {
  Engine engine = Engine::kMegatron;
  spec::ModelSpec model;
  spec::TrainSpec train;  // seq_len and global_batch_tokens; precision
  spec::Layout layout;
  std::optional<int64_t> gpus;           // the world size, when the file says it
  std::optional<int64_t> gpus_per_node;  // when the file says it
  std::vector<std::string> notes;        // what was assumed, and why
  std::vector<std::string> warnings;     // what was ignored (unknown flags with allow_unknown)
  // The MoE dispatcher the file runs, when it says: Megatron's flex dispatcher (DeepEP or
  // HybridEP, or the older --moe-enable-deepep) sends a token once per remote node
  // (cost::CostParams::ep_dispatch_per_node); alltoall and allgather do not.
  std::optional<bool> ep_dispatch_per_node;
  // Whether an interleaved pipeline overlaps its sends with compute, when the file runs one
  // (cost::CostParams::pp_p2p_overlap): Megatron-LM's default, off with
  // --no-overlap-p2p-communication; Megatron-DeepSpeed's opt-in --overlap-p2p-communication.
  std::optional<bool> pp_p2p_overlap;
  // Capability rules about the models pentamesh writes for the engine that do not bind this file:
  // it names a model the engine registers itself (torchtitan's deepseek_v3 or llama4 flavors).
  std::vector<std::string> waived_rules;
};

// The stack facts the file states, over a profile's params: its MoE dispatcher and whether its
// interleaved pipeline overlaps sends.
void CostAsImported(const Imported& im, cost::CostParams& params);

// The capability rules the imported run breaks: Violations less im.waived_rules.
std::vector<const CapabilityRule*> ImportViolations(const Imported& im);

// How import-config reads a launch script: kBash runs it under bash in a sandbox with recording
// stand-ins for the launchers (sandbox.cc) and reads the argv they received; kBuiltin reads it
// with pentamesh's own reader of a subset of bash (script.cc); kAuto is kBash where bash is on
// PATH and the host gives the read-only sandbox, else kBuiltin, and kBuiltin too when bash ran
// no training entry point (a bare flag list).
enum class Shell { kAuto, kBash, kBuiltin };
// "auto", "bash", "builtin"; the error names the option.
core::Result<Shell> ParseShell(const std::string& option, const std::string& name);

struct ImportOptions {
  std::optional<Engine> engine;      // detected from the file when absent
  std::optional<int64_t> gpus;       // world size when the file does not say it
  std::optional<std::string> model;  // preset or TOML, when the file does not say the model
  std::optional<int64_t> seq_len;    // when the file does not say it
  bool allow_unknown = false;        // flags the engine's parser lacks: a warning, not an error
  Shell shell = Shell::kAuto;        // how a launch script is read
  double shell_timeout_s = 30;       // the bash evaluation's time limit
};

// Reads a Megatron-LM script or command line, a torchtitan TOML, or a DeepSpeed launch script /
// ds_config.json. Errors name the file, the line or key, and the reason.
core::Result<Imported> ImportConfig(const std::string& path, const ImportOptions& options);
// Same, from text (name is used in messages and to guess the engine).
core::Result<Imported> ImportText(const std::string& name, const std::string& text,
                                  const std::string& dir, const ImportOptions& options);

}  // namespace pentamesh::launch
