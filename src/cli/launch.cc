// `--emit ENGINE --out DIR` (plan, estimate) and `pentamesh import-config FILE`: thin wrappers of
// launch/ (emitters, importers, the engine capability table) and cost::EstimateLayout.
#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/launch_cli.h"
#include "cli/plan_common.h"
#include "core/quote.h"
#include "spec/load_toml.h"
#include "spec/validate.h"

namespace pentamesh::cli {
namespace {

std::string& CommandLineStorage() {
  static std::string line;
  return line;
}

struct ImportArgs {
  std::string file;
  std::string engine;
  std::string cluster = "h100-sxm";
  std::optional<int64_t> gpus;
  std::string model;
  std::optional<int64_t> seq_len;
  std::string stack;  // empty: the engine's own profile
  bool allow_unknown = false;
  std::string shell = "auto";
  bool json = false;
};

// --engine, --gpus, --model and --seq-len as the importer's options.
core::Result<launch::ImportOptions> ImportOptionsOf(const ImportArgs& a) {
  launch::ImportOptions o;
  if (!a.engine.empty()) {
    PM_ASSIGN_OR_RETURN(o.engine, launch::ParseEngine("--engine", a.engine));
  }
  o.gpus = a.gpus;
  if (!a.model.empty()) o.model = a.model;
  o.seq_len = a.seq_len;
  o.allow_unknown = a.allow_unknown;
  PM_ASSIGN_OR_RETURN(o.shell, launch::ParseShell("--shell", a.shell));
  return o;
}

// The model line: shape, then experts, MLA and the attention window where the model has them.
void PrintImportedModel(const spec::ModelSpec& m) {
  const spec::MlaSpec& mla = m.mla;
  fmt::print("model: {} layers, hidden {}, heads {}/{} kv, FFN {}, vocab {}{}{}{}\n", m.layers,
             m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab,
             m.is_moe() ? fmt::format(", {} experts top-{} (FFN {})", m.moe.experts, m.moe.top_k,
                                      m.moe.expert_ffn_hidden)
                        : std::string(),
             m.is_mla() ? fmt::format(", MLA q/kv rank {}/{}, qk {}+{}, v {}", mla.q_lora_rank,
                                      mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim,
                                      mla.v_head_dim)
                        : std::string(),
             m.sliding_window > 0
                 ? fmt::format(", window {} (global every {})", m.sliding_window, m.global_every)
                 : std::string());
}

// The text report: the file's model, batch and layout, the estimate and the rules it breaks.
void PrintImport(const ImportArgs& a, const launch::Imported& im, const spec::TrainSpec& train,
                 const spec::ClusterSpec& cluster, const cost::Estimate& e,
                 const launch::StackChoice& stack) {
  const auto engine_rules = launch::ImportViolations(im);
  fmt::print("pentamesh import-config: {} ({})\n", a.file, launch::ToString(im.engine));
  for (const auto& n : im.notes) fmt::print("  note: {}\n", n);
  PrintImportedModel(im.model);
  fmt::print("batch: seq {}, {} sequences ({} tokens) per step, {} GPUs of {}\n", train.seq_len,
             train.global_batch_seqs(), train.global_batch_tokens, cluster.gpus(), cluster.name);
  fmt::print("--layout \"{}\"\n", spec::FormatLayout(im.layout));
  fmt::print("stack profile: {}, {}\n", stack.profile, stack.reason);
  if (e.microbatches > 0) {
    fmt::print(
        "estimate: memory {:.2f} GB of {:.2f} GB, step {:.3f} s, {:.0f} tokens/s, MFU {:.1f}%, "
        "fits: {}\n",
        e.memory.total / 1e9, e.memory.capacity / 1e9, e.time.step, e.tokens_per_s, 100 * e.mfu,
        e.fits ? "yes" : "no");
  }
  for (const auto& v : e.violations) fmt::print("  violation: {}\n", v);
  for (const auto* r : engine_rules) {
    fmt::print("  engine rule {}: {}\n", r->id, r->message);
  }
  fmt::print(
      "compare with the planner: pentamesh plan --model <model> --train <train> "
      "--cluster {} --gpus {} --engine {} --baseline {}\n",
      a.cluster, cluster.gpus(), launch::ToString(im.engine), a.file);
}

int RunImport(const ImportArgs& a) {
  auto o = ImportOptionsOf(a);
  if (!o.ok()) return Fail(o.status().message());
  auto imported = launch::ImportConfig(a.file, *o);
  if (!imported.ok()) return Fail(imported.status().message());
  const launch::Imported& im = *imported;
  for (const auto& w : im.warnings) std::fprintf(stderr, "pentamesh: warning: %s\n", w.c_str());
  auto cluster = spec::LoadCluster(a.cluster, im.gpus);
  if (!cluster.ok()) return Fail(fmt::format("--cluster: {}", cluster.status().message()));
  spec::TrainSpec train = im.train;
  train.name = "imported";
  const std::vector<std::string> invalid = spec::Validate(im.model, *cluster, train, im.layout);
  // Costed with the stack profile of the engine the file is for unless --stack names another, as
  // plan --emit chose and costed it (docs/launch.md).
  const launch::StackChoice stack = launch::ChooseStack(a.stack, im.engine);
  Inputs in{.model = im.model, .cluster = *cluster, .train = train, .stack = {}, .params = {}};
  if (const core::Status st = ApplyStack(stack.profile, in); !st.ok()) {
    return Fail(fmt::format("--stack: {}", st.message()));
  }
  launch::CostAsImported(im, in.params);
  const cost::Estimate e =
      cost::EstimateLayout(in.model, in.cluster, in.train, im.layout, in.params);
  if (a.json) {
    nlohmann::json j = {{"engine", launch::ToString(im.engine)},
                        {"stack", stack.profile},
                        {"gpus", cluster->gpus()},
                        {"seq_len", train.seq_len},
                        {"global_batch_tokens", train.global_batch_tokens},
                        {"notes", im.notes},
                        {"warnings", im.warnings},
                        {"invalid", invalid},
                        {"estimate", EstimateJson(e)}};
    fmt::print("{}\n", j.dump(2));
  } else {
    PrintImport(a, im, train, *cluster, e, stack);
  }
  if (!invalid.empty()) {
    for (const auto& v : invalid) std::fprintf(stderr, "pentamesh: error: %s\n", v.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

void SetCommandLine(int argc, char** argv) {
  std::string line = "pentamesh";
  for (int i = 1; i < argc; ++i) {
    line += " " + core::ShellQuote(argv[i]);
  }
  CommandLineStorage() = line;
}

const std::string& CommandLine() { return CommandLineStorage(); }

launch::StackChoice StackFor(const std::string& given, std::optional<launch::Engine> engine) {
  if (engine) return launch::ChooseStack(given, *engine);
  if (!given.empty()) return {given, "--stack " + given};
  return {calib::kDefaultStack, "the default (no --stack given)"};
}

void AddEmitOptions(CLI::App& sub, EmitArgs& args) {
  sub.add_option("--emit", args.engine,
                 "write the launch files of this engine: megatron, torchtitan, deepspeed");
  sub.add_option("--out", args.out, "directory for the --emit files");
}

core::Status CheckEmitArgs(const EmitArgs& args) {
  if (args.engine.empty() != args.out.empty()) {
    return core::Status::Error(args.engine.empty() ? "--out needs --emit ENGINE"
                                                   : "--emit needs --out DIR");
  }
  if (!args.engine.empty()) {
    PM_ASSIGN_OR_RETURN(launch::Engine e, launch::ParseEngine("--emit", args.engine));
    (void)e;
  }
  return core::Status::Ok();
}

int EmitAndWrite(const EmitArgs& args, const launch::EmitInput& in) {
  if (args.engine.empty()) return 0;
  auto engine = launch::ParseEngine("--emit", args.engine);
  if (!engine.ok()) return Fail(engine.status().message());
  if (!in.estimate.fits) {
    std::fprintf(stderr, "pentamesh: warning: the cost model predicts this layout does not fit\n");
  }
  auto files = launch::Emit(*engine, in);
  if (!files.ok()) return Fail(files.status().message());
  const core::Status written = launch::WriteFiles(args.out, *files);
  if (!written.ok()) return Fail(written.message());
  for (const auto& f : *files) {
    std::fprintf(stderr, "pentamesh: wrote %s/%s\n", args.out.c_str(), f.name.c_str());
  }
  return 0;
}

RunFn AddImportConfigCommand(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "import-config",
      "Read a Megatron-LM script, torchtitan TOML or DeepSpeed config; print and cost its layout");
  auto args = std::make_shared<ImportArgs>();
  sub->add_option("file", args->file, "the engine's config or launch script")->required();
  sub->add_option("--engine", args->engine, "megatron, torchtitan or deepspeed (default: detect)");
  sub->add_option("--cluster", args->cluster, "cluster preset or TOML file")->capture_default_str();
  sub->add_option("--gpus", args->gpus, "world size, where the file does not say it");
  sub->add_option("--model", args->model, "model preset or TOML, where the file does not say it");
  sub->add_option("--seq-len", args->seq_len, "sequence length, where the file does not say it");
  sub->add_option("--stack", args->stack,
                  "stack profile to cost with (default: the engine's own, as plan --emit uses)");
  sub->add_flag("--allow-unknown", args->allow_unknown,
                "import a script with flags the engine's parser lacks (a warning lists them; "
                "default: exit 2 naming them)");
  sub->add_option("--shell", args->shell,
                  "how a launch script is read: bash (run in a sandbox with recording stand-ins "
                  "for the launchers), builtin (pentamesh's own reader) or auto (bash where the "
                  "host gives the read-only sandbox)")
      ->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON");
  return [args]() { return RunImport(*args); };
}

}  // namespace pentamesh::cli
