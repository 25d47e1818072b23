// `pentamesh train --config run.toml [--set table.key=value ...] [--layout "dp=2 tp=2 zero=1"]
// [--resume auto|PATH] [--trace FILE]`: trains alone, or as one rank of `mpirun -np N
// pentamesh train ...` (also under Slurm's srun through Open MPI's PMIx). Parses, builds the job
// (train::Job) and runs train::RunTraining (resume, checkpoints, evaluation, metrics.jsonl,
// divergence handling: train/run_loop.h); this file prints: the model and data lines, a progress
// line per step on rank 0 (a live line on a terminal), warnings, and at the end the held-out loss
// against the corpus's unigram baseline and the measured memory per tag next to the prediction.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "comm/mpi_communicator.h"
#include "core/quote.h"
#include "spec/recipe.h"
#include "train/engine_rules.h"
#include "train/job.h"
#include "train/recipe_run.h"
#include "train/run_config.h"
#include "train/run_loop.h"
#include "train/trainer.h"

namespace pentamesh::cli {

bool UnderLauncher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string resume;      // "", "auto" or a checkpoint path
  std::string layout;      // overrides run.layout
  std::string trace;       // --trace FILE
  std::string recipe;      // --recipe R: the phases of a recipe, one after another
  bool overwrite = false;  // --overwrite: replace another run's checkpoints in ckpt.dir
};

int RunJob(train::Trainer& trainer, const TrainArgs& args, comm::Communicator* world);

std::string Mib(int64_t bytes) {
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20));
}

void PrintMemory(const std::array<int64_t, core::kMemTagCount>& peak, int64_t total,
                 const cost::Memory& predicted) {
  const auto pred = predicted.ByTag();
  fmt::print("peak memory per tag: measured (allocator, whole run) vs predicted (cost model):\n");
  for (int i = 0; i < core::kMemTagCount; ++i) {
    const auto tag = static_cast<core::MemTag>(i);
    const double m = static_cast<double>(peak[static_cast<size_t>(i)]);
    fmt::print(
        "  {:<12} {:>12} {:>12} {}\n", core::MemTagName(tag), Mib(peak[static_cast<size_t>(i)]),
        tag == core::MemTag::kOther ? "-" : Mib(static_cast<int64_t>(pred[static_cast<size_t>(i)])),
        pred[static_cast<size_t>(i)] > 0
            ? fmt::format("({:+.1f}%)",
                          (m - pred[static_cast<size_t>(i)]) / pred[static_cast<size_t>(i)] * 100)
            : "");
  }
  fmt::print("  {:<12} {:>12} {:>12}\n", "total", Mib(total),
             Mib(static_cast<int64_t>(predicted.total)));
}

std::string StepLine(const train::StepStats& s, int64_t total, double eta_s) {
  std::string line = fmt::format(
      "step {:>5}/{} loss {:.4f} lr {:.2e} gnorm {:.3f} {:>8.0f} tok/s mfu {:.3f} ETA {:>4.0f}s",
      s.step, total, s.loss, s.lr, s.grad_norm, s.tokens_per_s, s.mfu, eta_s);
  if (!s.moe.routed.empty()) {
    line += fmt::format(" aux {:.4f} imb {:.2f} drop {}", s.moe.aux_loss, s.moe.LoadImbalance(),
                        s.moe.dropped);
    if (s.moe.CollapseWarning(s.moe_top_k)) {
      line += fmt::format(" WARNING expert collapse ({:.0f}% of assignments on one expert)",
                          100 * s.moe.MaxExpertShare());
    }
  }
  if (s.eval_loss) line += fmt::format(" eval {:.4f}", *s.eval_loss);
  return line;
}

// Prints what the run loop reports: a self-overwriting progress line on a terminal (under
// mpirun a rank's stdout is Open MPI's pseudo-terminal even when mpirun's own output goes to a
// file, so there a line per logged step), warnings on stderr.
class Printer final : public train::RecipeObserver {
 public:
  // run_steps > 0: the steps of the whole run (a recipe's), printed instead of its segment's.
  Printer(bool tty, int64_t log_every, int64_t run_steps = 0)
      : tty_(tty), log_every_(log_every), run_steps_(run_steps) {}
  ~Printer() override {
    if (tty_ && mid_line_) fmt::print("\n");
  }
  void OnInfo(const std::string& message) override { fmt::print("{}{}\n", EndLine(), message); }
  void OnWarning(const std::string& message) override {
    fmt::print(stderr, "pentamesh: warning: {}\n", message);
  }
  void OnSegment(const train::RecipeSegment& s, size_t index, size_t count,
                 train::Trainer& trainer) override {
    const train::RunConfig& c = trainer.config();
    fmt::print(
        "{}segment {}/{} '{}' (phase {}): steps {}-{}, seq_len {}, batch {} seqs, {}, RoPE {}{}, "
        "layout {}\n",
        EndLine(), index + 1, count, s.name, s.phase + 1, s.first_step + 1, s.last_step,
        c.train.seq_len, c.train.global_batch_seqs(), spec::PrecisionName(c.train.precision),
        spec::RopeScalingName(c.model.rope_scaling.kind),
        c.model.rope_scaling.kind == spec::RopeScalingKind::kLlama3
            ? fmt::format(" x{:g}", c.model.rope_scaling.factor)
            : "",
        spec::ShortLayout(c.run.layout));
  }
  void OnStep(const train::StepStats& s, int64_t segment_total, double eta_s,
              bool evaluated) override {
    const int64_t total = run_steps_ > 0 ? run_steps_ : segment_total;
    // A recipe's ETA: the rest of the run at this segment's mean step time.
    if (total > segment_total && segment_total > s.step) {
      eta_s *= static_cast<double>(total - s.step) / static_cast<double>(segment_total - s.step);
    }
    if (tty_) {
      fmt::print("\r{}{}", StepLine(s, total, eta_s), evaluated ? "\n" : "");
      mid_line_ = !evaluated;
    } else if (evaluated || s.step % log_every_ == 0) {
      fmt::print("{}\n", StepLine(s, total, eta_s));
    }
    std::fflush(stdout);
  }

 private:
  const char* EndLine() {
    const bool was = tty_ && mid_line_;
    mid_line_ = false;
    return was ? "\n" : "";
  }
  bool tty_;
  int64_t log_every_;
  int64_t run_steps_;
  bool mid_line_ = false;
};

void PrintHeader(train::Trainer& trainer, const train::UnigramBaseline& baseline) {
  const train::RunConfig& c = trainer.config();
  fmt::print("model {}: {} params, {} layers, hidden {}, vocab {}{}; {} precision, layout {}\n",
             c.model.name, trainer.params().numel(), c.model.layers, c.model.hidden, c.model.vocab,
             c.model.is_moe()
                 ? fmt::format(", {} experts top-{}", c.model.moe.experts, c.model.moe.top_k)
                 : "",
             c.train.precision == spec::Precision::kBf16 ? "bf16" : "fp32",
             spec::ShortLayout(c.run.layout));
  fmt::print(
      "data {}: {} train / {} held-out tokens; unigram entropy {:.4f} nats/token, held-out "
      "unigram cross-entropy {:.4f}\n",
      c.data.dataset, trainer.dataset().tokens(data::Split::kTrain),
      trainer.dataset().tokens(data::Split::kHeldout), baseline.train_entropy,
      baseline.heldout_xent);
}

// --recipe: the run's config without a layout of its own for the phases that name one; --layout
// (if given) is every phase's.
int RunRecipeTrain(const TrainArgs& args) {
  auto config = train::LoadRunConfig(args.config, args.sets);
  if (!config.ok()) return Fail(config.status().message());
  auto recipe = spec::LoadRecipe(args.recipe);
  if (!recipe.ok()) return Fail(recipe.status().message());
  std::optional<spec::Layout> layout;
  if (!args.layout.empty()) {
    auto l = spec::ParseLayout(args.layout);
    if (!l.ok()) return Fail("--layout: " + l.status().message());
    layout = *l;
  }
  auto segments = train::RecipeSegments(*config, *recipe, layout);
  if (!segments.ok()) return Fail(segments.status().message());
  int64_t ranks = 1;
  for (const train::RecipeSegment& seg : *segments)
    ranks = std::max(ranks, seg.config.run.layout.gpus());
  std::unique_ptr<comm::MpiWorld> world;
  if (UnderLauncher() || ranks > 1) {
    auto w = comm::MpiWorld::Create();
    if (!w.ok()) return Fail(w.status().message());
    world = std::move(*w);
    for (train::RecipeSegment& seg : *segments) seg.config.run.ranks_per_host = world->local_size();
  }
  if (world && world->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
    return Fail("cannot silence stdout");
  fmt::print("recipe {}: {} phases, {} segments, {} steps\n", recipe->name, recipe->phases.size(),
             segments->size(), segments->back().last_step);
  core::Result<std::vector<train::RunSummary>> run = [&] {
    Printer printer(isatty(fileno(stdout)) != 0 && !world, config->run.log_every,
                    segments->back().last_step);
    return train::RunRecipe(
        *segments, world.get(),
        {.resume = args.resume, .trace = args.trace, .world = nullptr, .overwrite = args.overwrite},
        &printer);
  }();
  if (!run.ok()) return Fail(run.status().message());
  int64_t steps = 0;
  double elapsed = 0;
  for (const train::RunSummary& r : *run) {
    steps += r.steps;
    elapsed += r.elapsed_s;
  }
  fmt::print(
      "done: recipe {}: {} steps in {:.1f} s; held-out loss {:.4f} at the last phase's sequence "
      "length\n",
      recipe->name, steps, elapsed, run->empty() ? 0.0 : run->back().last_eval);
  if (!run->empty() && !run->back().metrics_path.empty())
    fmt::print("metrics: {}\n", run->back().metrics_path);
  return 0;
}

int RunTrain(const TrainArgs& args) {
  if (!args.recipe.empty()) return RunRecipeTrain(args);
  std::vector<std::string> sets = args.sets;
  if (!args.layout.empty()) sets.push_back("run.layout=" + core::TomlString(args.layout));
  auto config = train::LoadRunConfig(args.config, sets);
  if (!config.ok()) return Fail(config.status().message());
  if (core::Status st = train::CheckEngineLayout(*config); !st.ok()) return Fail(st.message());
  // Distributed when launched by mpirun/srun or when the layout needs several ranks (then the
  // mesh reports the rank-count mismatch by name).
  std::unique_ptr<comm::MpiWorld> world;
  if (UnderLauncher() || config->run.layout.gpus() > 1) {
    auto w = comm::MpiWorld::Create();
    if (!w.ok()) return Fail(w.status().message());
    world = std::move(*w);
    config->run.ranks_per_host = world->local_size();
  }
  auto job = train::Job::Create(*config, world.get());
  if (!job.ok()) return Fail(job.status().message());
  return RunJob(job->trainer(), args, job->world());  // the job goes before the world
}

int RunJob(train::Trainer& trainer, const TrainArgs& args, comm::Communicator* world) {
  const train::RunConfig& c = trainer.config();
  // Rank 0 reports; the others print nothing (errors still reach stderr).
  if (trainer.rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
    return Fail("cannot silence stdout");
  auto baseline = trainer.Baseline();
  if (!baseline.ok()) return Fail(baseline.status().message());
  PrintHeader(trainer, *baseline);
  core::Result<train::RunSummary> run = [&] {
    Printer printer(isatty(fileno(stdout)) != 0 && (world == nullptr || world->size() == 1),
                    c.run.log_every);
    return train::RunTraining(
        trainer,
        {.resume = args.resume, .trace = args.trace, .world = world, .overwrite = args.overwrite},
        &printer);
  }();
  if (!run.ok()) return Fail(run.status().message());
  fmt::print(
      "done: {} steps in {:.1f} s ({:.0f} tokens/s); held-out loss {:.4f} vs unigram {:.4f} "
      "nats/token ({})\n",
      run->steps, run->elapsed_s,
      static_cast<double>(run->steps * c.train.global_batch_tokens) / run->elapsed_s,
      run->last_eval, baseline->heldout_xent,
      run->last_eval < baseline->heldout_xent ? "learned context"
                                              : "NOT below the unigram baseline");
  if (run->step_time_median_s > 0) {
    const double predicted = trainer.predicted().time.step;
    fmt::print(
        "step time: measured {:.4f} s (median{}), predicted {:.4f} s by the cost model ({:+.1f}%; "
        "{})\n",
        run->step_time_median_s, run->steps > 1 ? " of the steps after the first" : "", predicted,
        (predicted - run->step_time_median_s) / run->step_time_median_s * 100,
        c.run.host ? "this host's measured profile" : "nominal host numbers, no host profile");
    // A cached profile measured while the machine was busy predicts every later run too slow.
    if (c.run.auto_host_profile && std::fabs(predicted / run->step_time_median_s - 1) > 0.5) {
      fmt::print(
          "  note: off by more than 50%: if {} was measured while the machine was busy, delete it "
          "and the next run measures this host again\n",
          c.run.host_profile);
    }
  }
  PrintMemory(run->peak_bytes, run->peak_bytes_total, trainer.predicted().memory);
  if (!run->metrics_path.empty()) fmt::print("metrics: {}\n", run->metrics_path);
  return 0;
}

}  // namespace

RunFn AddTrainCommand(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "train", "Train a model on the CPU engine, alone or as one rank of mpirun / srun");
  auto args = std::make_shared<TrainArgs>();
  sub->add_option("--config", args->config, "run TOML: [model] [train] [optim] [data] [run]")
      ->required();
  sub->add_option("--set", args->sets, "override a key, e.g. --set optim.lr=1e-3 (repeatable)");
  sub->add_option("--resume", args->resume,
                  "auto: newest intact checkpoint under ckpt.dir (none: start fresh); or a "
                  "checkpoint directory");
  sub->add_flag("--overwrite", args->overwrite,
                "a fresh run replaces the checkpoints of another run in ckpt.dir (without it: "
                "refused, naming that run)");
  sub->add_option("--trace", args->trace,
                  "write a Chrome trace-event JSON of every action and collective of every rank")
      ->check(OutputFile());
  sub->add_option("--recipe", args->recipe,
                  "run a recipe's phases one after another (preset or TOML: [[recipe.phase]] with "
                  "tokens, seq_len, global_batch_tokens, batch_ramp, rope, precision, layout); the "
                  "config's [train] is replaced by each phase's");
  sub->add_option("--layout", args->layout,
                  "the layout, e.g. \"dp=2 tp=2 pp=2 schedule=1f1b zero=1 sp=off\" (run under "
                  "mpirun -np <the layout's rank count>)");
  return [args]() { return RunTrain(*args); };
}

}  // namespace pentamesh::cli
