// `pentamesh train --config run.toml [--set table.key=value ...] [--layout "dp=2 tp=2 zero=1"]
// [--resume auto|PATH] [--trace FILE]`: trains on one process, or as one rank of `mpirun -np N
// pentamesh train
// ...` (also under Slurm's srun through Open MPI's PMIx). Rank 0 prints a progress line per step
// (a live line on a terminal), writes metrics.jsonl (with comm_bytes per mesh group) to
// run.out_dir and ends with the held-out loss against the corpus's unigram baseline and the
// measured memory per tag. Checkpoints go to ckpt.dir every ckpt.interval steps (each rank writes
// its shard in the background; rank 0 commits once all are durable) at any layout, and
// --resume loads them into any other layout. A step with a non-finite loss or grad norm is skipped
// (on every rank) and logged in metrics.jsonl; more than run.max_nonfinite_in_row in a row stop the
// run (exit 2, naming the cause and the step) with the last good checkpoint named; a loss above
// run.spike_factor x the running median is reported as a spike. --trace FILE: rank 0 writes a
// Chrome trace-event JSON of every pipeline action, p2p transfer and collective of every rank over
// the whole run (docs/pipeline.md).
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/train_state.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "comm/mpi_communicator.h"
#include "mesh/mesh.h"
#include "train/metrics.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace pentamesh::cli {
namespace {

int RunTrainer(train::Trainer& trainer, const std::string& resume, comm::Communicator* world,
               const std::string& trace);

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string resume;  // "", "auto" or a checkpoint path
  std::string layout;  // overrides run.layout
  std::string trace;   // --trace FILE
};

// True when a launcher (mpirun, srun through PMIx) started this process.
bool UnderLauncher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

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

core::Status Resume(const std::string& spec, train::Trainer& trainer) {
  const std::string& root = trainer.config().ckpt.dir;
  const bool lead = trainer.rank() == 0;
  PM_ASSIGN_OR_RETURN(auto found, ckpt::ResolveResume(spec, root, [lead](const std::string& m) {
                        if (lead) fmt::print(stderr, "pentamesh: warning: {}\n", m);
                      }));
  if (!found) {
    fmt::print("resume: no checkpoint under {}; starting from step 0\n", root);
    return core::Status::Ok();
  }
  PM_RETURN_IF_ERROR(ckpt::RestoreTrainer(*found, trainer));
  fmt::print("resumed from {} at step {}\n", found->dir(), trainer.step());
  return core::Status::Ok();
}

// Every ckpt.interval steps and at the end; a failed save (e.g. disk full) is reported and the
// run continues: the previous checkpoint is intact.
void MaybeSave(train::Trainer& trainer, ckpt::AsyncSaver& saver, int64_t first_step,
               int world_size) {
  const train::RunConfig& c = trainer.config();
  const int64_t step = trainer.step();
  const bool due =
      step == trainer.total_steps() || (c.ckpt.interval > 0 && step % c.ckpt.interval == 0);
  if (!c.ckpt.dir.empty() && due) {
    core::Status st = saver.Save(ckpt::TrainerSnapshot(trainer, trainer.rank(), world_size));
    if (!st.ok()) fmt::print(stderr, "pentamesh: warning: {}\n", st.message());
  } else if (!c.ckpt.dir.empty()) {
    core::Status st = saver.Poll();  // commits a finished background save (collective)
    if (!st.ok()) fmt::print(stderr, "pentamesh: warning: {}\n", st.message());
  }
  if (c.run.debug_kill_step > 0 && step == c.run.debug_kill_step && first_step == 0 &&
      (c.run.debug_kill_rank < 0 || c.run.debug_kill_rank == trainer.rank())) {
    fmt::print(stderr, "pentamesh: run.debug_kill_step: SIGKILL after step {} (world rank {})\n",
               step, trainer.rank());
    std::fflush(stderr);
    raise(SIGKILL);
  }
}

// A skipped step: reported (and logged in metrics.jsonl); a run of more than
// run.max_nonfinite_in_row stops the job with exit 2, naming the cause, the step and the last good
// checkpoint (divergence is an outcome of training, not a crash).
int OnNonFinite(const train::StepStats& s, train::Trainer& trainer, ckpt::AsyncSaver& saver,
                train::MetricsWriter* metrics) {
  const train::RunConfig& c = trainer.config();
  const char* cause = std::isfinite(s.ce_loss) ? "gradient norm" : "loss";
  fmt::print(stderr,
             "pentamesh: warning: step {} skipped: non-finite {} ({} in a row, {} in this run)\n",
             s.step + 1, cause, s.nonfinite_in_row, trainer.nonfinite_total());
  if (metrics) {
    if (core::Status st = metrics->WriteSkipped(s); !st.ok()) return Fail(st.message());
  }
  if (s.nonfinite_in_row <= c.run.max_nonfinite_in_row) return 0;
  const core::Status st = saver.Wait();
  const std::vector<std::string> dirs =
      c.ckpt.dir.empty() ? std::vector<std::string>{} : ckpt::ListCheckpoints(c.ckpt.dir);
  // The weights after step s.step gave the non-finite loss, so its checkpoint is suspect; the
  // newest one before it holds weights whose loss was finite.
  std::string good;
  for (const std::string& d : dirs) {
    const std::string name = std::filesystem::path(d).filename().string();  // step-00000042
    int64_t step = 0;
    const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
    if (ec == std::errc() && end == name.data() + name.size() && step < s.step) {
      good = d;
      break;
    }
  }
  fmt::print(
      stderr,
      "pentamesh: error: training diverged: {} non-finite steps in a row (run.max_nonfinite_in_row="
      "{}), the last at step {} with a non-finite {} (lr {:.3g}); stopping after step {}. {}{}\n",
      s.nonfinite_in_row, c.run.max_nonfinite_in_row, s.step + 1, cause, s.lr, s.step,
      good.empty()
          ? std::string("No checkpoint before the divergence was saved.")
          : fmt::format("The last good checkpoint is {} (resume with --resume {})", good, good),
      st.ok() ? "" : "; " + st.message());
  return 2;
}

// The checkpoint collective: true iff `ok` on every rank (an all-reduce, so also a barrier).
ckpt::AllOk AllOkOver(comm::Communicator* world) {
  if (world == nullptr || world->size() == 1) return {};
  return [world](bool ok) {
    int32_t failed = ok ? 0 : 1;
    world->all_reduce(&failed, 1, core::Dtype::kI32);
    return failed == 0;
  };
}

// Under a launcher rank 0 alone builds a missing dataset (tokenizer training and tokenization of
// data.corpus) while the others wait in a broadcast of the outcome, so a job trains one tokenizer
// instead of one per rank; every rank then opens the finished dataset in Trainer::Create.
core::Status PrepareDatasetOnRankZero(const train::RunConfig& config, comm::Communicator& world) {
  int32_t ok = 1;
  std::string error;
  if (world.rank() == 0) {
    auto dataset = train::OpenOrBuildDataset(config.data, config.model.vocab);
    if (!dataset.ok()) {
      ok = 0;
      error = dataset.status().message();
    }
  }
  world.broadcast(&ok, 1, core::Dtype::kI32, 0);
  if (ok) return core::Status::Ok();
  return core::Status::Error(
      world.rank() == 0 ? error : "data.dataset: rank 0 could not prepare it (see its message)");
}

int RunTrain(const TrainArgs& args) {
  std::vector<std::string> sets = args.sets;
  if (!args.layout.empty()) sets.push_back(fmt::format("run.layout=\"{}\"", args.layout));
  auto config = train::LoadRunConfig(args.config, sets);
  if (!config.ok()) return Fail(config.status().message());
  if (core::Status st = train::CheckEngineLayout(*config); !st.ok()) return Fail(st.message());
  // Distributed when launched by mpirun/srun or when the layout needs several ranks (then the
  // mesh reports the rank-count mismatch by name).
  std::unique_ptr<comm::MpiWorld> world;
  std::unique_ptr<mesh::Mesh> mesh;
  train::Distributed dist;
  if (UnderLauncher() || config->run.layout.gpus() > 1) {
    auto w = comm::MpiWorld::Create();
    if (!w.ok()) return Fail(w.status().message());
    world = std::move(*w);
    config->run.ranks_per_host = world->local_size();
    auto m = mesh::Mesh::Create(config->run.layout, *world);
    if (!m.ok()) return Fail(fmt::format("run.layout: {}", m.status().message()));
    mesh = std::make_unique<mesh::Mesh>(std::move(*m));
    dist = {.mesh = mesh.get(), .world = &world->world()};
    if (core::Status st = PrepareDatasetOnRankZero(*config, world->world()); !st.ok())
      return Fail(st.message());
  }
  auto created = train::Trainer::Create(*config, dist);
  if (!created.ok()) return Fail(created.status().message());
  const int code = RunTrainer(**created, args.resume, dist.world, args.trace);
  created->reset();  // the trainer's groups go before the mesh and the world
  mesh.reset();
  return code;
}

int RunTrainer(train::Trainer& trainer, const std::string& resume, comm::Communicator* world,
               const std::string& trace) {
  const train::RunConfig& c = trainer.config();
  const bool lead = trainer.rank() == 0;
  // Rank 0 reports; the others print nothing (errors still reach stderr).
  if (!lead && std::freopen("/dev/null", "w", stdout) == nullptr)
    return Fail("cannot silence stdout");
  auto baseline = trainer.Baseline();
  if (!baseline.ok()) return Fail(baseline.status().message());
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
      trainer.dataset().tokens(data::Split::kHeldout), baseline->train_entropy,
      baseline->heldout_xent);
  const int64_t start_step = trainer.step();
  const ckpt::AllOk all_ok = AllOkOver(world);
  if (!resume.empty()) {
    core::Status st = Resume(resume, trainer);
    // Every rank loads its own shard: all continue only if all succeeded.
    const bool all = all_ok ? all_ok(st.ok()) : st.ok();
    if (!st.ok()) return Fail(st.message());
    if (!all) return Fail("resume failed on another rank (see its message)");
  }
  const bool resumed = trainer.step() > start_step;
  ckpt::AsyncSaver saver(
      {.root = c.ckpt.dir, .keep = static_cast<int>(c.ckpt.keep), .env = nullptr, .all_ok = all_ok},
      c.ckpt.async);
  std::unique_ptr<train::MetricsWriter> metrics;
  if (lead && !c.run.out_dir.empty()) {
    auto w = train::MetricsWriter::Open(c.run.out_dir, resumed);
    if (!w.ok()) return Fail(w.status().message());
    metrics = std::make_unique<train::MetricsWriter>(std::move(*w));
  }
  // One self-overwriting progress line on a terminal. Under mpirun a rank's stdout is Open MPI's
  // pseudo-terminal even when mpirun's own output goes to a file, so there a line per step.
  const bool tty = isatty(fileno(stdout)) != 0 && (world == nullptr || world->size() == 1);
  const int64_t total = trainer.total_steps();
  std::array<int64_t, core::kMemTagCount> peak{};
  int64_t peak_total = 0;
  double elapsed_s = 0, last_eval = 0;
  const int64_t first_step = trainer.step();
  if (!trace.empty()) trainer.set_tracing(true);
  while (trainer.step() < total) {
    train::StepStats s = trainer.Step();
    elapsed_s += s.step_time_s;
    if (s.skipped) {
      const int code = OnNonFinite(s, trainer, saver, metrics.get());
      if (code != 0) return code;
      continue;
    }
    if (s.loss_spike && lead) {
      fmt::print(stderr, "pentamesh: warning: step {}: loss spike {:.4g} > {} x median {:.4g}\n",
                 s.step, s.loss, c.run.spike_factor, s.loss_median);
    }
    MaybeSave(trainer, saver, first_step, world ? world->size() : 1);
    const bool eval_now =
        s.step == total || (c.run.eval_every > 0 && s.step % c.run.eval_every == 0);
    if (eval_now) last_eval = *(s.eval_loss = trainer.Evaluate());
    for (size_t t = 0; t < peak.size(); ++t) peak[t] = std::max(peak[t], s.peak_bytes[t]);
    peak_total = std::max(peak_total, s.peak_bytes_total);
    if (metrics) {
      core::Status st = metrics->Write(s, &trainer.predicted(), trainer.flops_per_token());
      if (!st.ok()) return Fail(st.message());
    }
    const double eta =
        elapsed_s / static_cast<double>(s.step - first_step) * static_cast<double>(total - s.step);
    if (tty) {
      fmt::print("\r{}{}", StepLine(s, total, eta), eval_now ? "\n" : "");
      std::fflush(stdout);
    } else if (eval_now || s.step % c.run.log_every == 0) {
      fmt::print("{}\n", StepLine(s, total, eta));
      std::fflush(stdout);
    }
  }
  if (tty) fmt::print("\n");
  if (!trace.empty()) {
    const std::string json = trainer.GatherTrace();  // collective: every rank
    if (lead) {
      std::FILE* f = std::fopen(trace.c_str(), "w");
      if (f == nullptr) return Fail(fmt::format("--trace: cannot write {}", trace));
      const bool ok = std::fwrite(json.data(), 1, json.size(), f) == json.size();
      if (std::fclose(f) != 0 || !ok) return Fail(fmt::format("--trace: cannot write {}", trace));
      fmt::print("trace: {} (Chrome trace-event JSON; open in Perfetto)\n", trace);
    }
  }
  const core::Status saved = saver.Wait();
  if (!saved.ok()) fmt::print(stderr, "pentamesh: warning: {}\n", saved.message());
  fmt::print(
      "done: {} steps in {:.1f} s ({:.0f} tokens/s); held-out loss {:.4f} vs unigram {:.4f} "
      "nats/token ({})\n",
      total - first_step, elapsed_s,
      static_cast<double>((total - first_step) * c.train.global_batch_tokens) / elapsed_s,
      last_eval, baseline->heldout_xent,
      last_eval < baseline->heldout_xent ? "learned context" : "NOT below the unigram baseline");
  PrintMemory(peak, peak_total, trainer.predicted().memory);
  if (metrics) fmt::print("metrics: {}\n", metrics->path());
  return 0;
}

}  // namespace

RunFn AddTrainCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("train", "Train a model on one process (configs/tiny-dense.toml)");
  auto args = std::make_shared<TrainArgs>();
  sub->add_option("--config", args->config, "run TOML: [model] [train] [optim] [data] [run]")
      ->required();
  sub->add_option("--set", args->sets, "override a key, e.g. --set optim.lr=1e-3 (repeatable)");
  sub->add_option("--resume", args->resume,
                  "auto: newest intact checkpoint under ckpt.dir (none: start fresh); or a "
                  "checkpoint directory");
  sub->add_option("--trace", args->trace,
                  "write a Chrome trace-event JSON of every action and collective of every rank")
      ->check(OutputFile());
  sub->add_option("--layout", args->layout,
                  "the layout, e.g. \"dp=2 tp=2 pp=2 schedule=1f1b zero=1 sp=off\" (run under "
                  "mpirun -np dp*tp*pp)");
  return [args]() { return RunTrain(*args); };
}

}  // namespace pentamesh::cli
