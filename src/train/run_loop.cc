#include "train/run_loop.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/owner.h"
#include "core/numeric.h"
#include "core/output.h"
#include "train/checkpoint_state.h"
#include "train/memory_checkpoint.h"
#include "train/metrics.h"

namespace pentamesh::train {
namespace {

RunObserver& Silent() {
  static RunObserver none;
  return none;
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

// What a resume did: the line to print and whether state was restored (then timed).
struct Resumed {
  std::string what;
  bool restored = false;
  std::vector<std::string> damaged;  // durable checkpoints passed over (set aside by rank 0)
};

// "auto" with in-memory copies: memory first (when every rank agrees on a step at least as new
// as the durable one), then the durable checkpoints.
core::Result<Resumed> Resume(const std::string& spec, Trainer& trainer, RunObserver& observer,
                             MemoryCheckpointer* memory) {
  const std::string& root = trainer.config().ckpt.dir;
  const bool lead = trainer.rank() == 0;
  if (spec == "auto" && memory != nullptr) {
    PM_ASSIGN_OR_RETURN(auto restored, memory->Resume(trainer, [&](const std::string& m) {
      observer.OnWarning(m);
    }));
    if (restored) {
      std::string ranks;
      for (int r : restored->from_partner)
        ranks += fmt::format("{}rank {} (held by its partner)", ranks.empty() ? "" : ", ", r);
      return Resumed{
          .what = fmt::format("resumed from memory ({}) at step {}: every rank from its own copy{}",
                              restored->dir, restored->step,
                              ranks.empty() ? "" : " except " + ranks + ", fetched over MPI"),
          .restored = true,
          .damaged = {}};
    }
  }
  std::vector<std::string> damaged;
  PM_ASSIGN_OR_RETURN(auto found, ckpt::ResolveResume(
                                      spec, root,
                                      [&](const std::string& m) {
                                        if (lead) observer.OnWarning(m);
                                      },
                                      &damaged));
  if (!found)
    return Resumed{
        .what = fmt::format("resume: no checkpoint under {}; starting from step 0", root),
        .restored = false,
        .damaged = {}};
  PM_RETURN_IF_ERROR(RestoreTrainer(*found, trainer));
  return Resumed{.what = fmt::format("resumed from {} at step {} (durable checkpoint)",
                                     found->dir(), trainer.step()),
                 .restored = true,
                 .damaged = std::move(damaged)};
}

// Every ckpt.interval steps and at the end; otherwise a finished background save is committed.
// Then the run.debug_kill_step fault injection (a first run only: a resumed one goes on).
// In-memory copies every ckpt.memory_interval steps (before the kill: a complete step survives).
void MaybeSave(Trainer& trainer, ckpt::AsyncSaver& saver, MemoryCheckpointer* memory,
               int64_t process_first_step, int world_size, const std::string& run_id,
               RunObserver& observer) {
  const RunConfig& c = trainer.config();
  const int64_t step = trainer.step();
  if (memory != nullptr && step % c.ckpt.memory_interval == 0) {
    if (const core::Status st = memory->Save(trainer); !st.ok()) observer.OnWarning(st.message());
  }
  const bool due =
      step == trainer.total_steps() || (c.ckpt.interval > 0 && step % c.ckpt.interval == 0);
  if (!c.ckpt.dir.empty()) {
    core::Status st;
    if (due) {
      ckpt::Snapshot snapshot = TrainerSnapshot(trainer, trainer.rank(), world_size);
      snapshot.state["run_id"] = run_id;
      st = saver.Save(std::move(snapshot));
    } else {
      st = saver.Poll();
    }
    if (!st.ok()) observer.OnWarning(st.message());
  }
  if (c.run.debug_kill_step > 0 && step == c.run.debug_kill_step && process_first_step == 0 &&
      (c.run.debug_kill_rank < 0 || c.run.debug_kill_rank == trainer.rank())) {
    std::fprintf(stderr,
                 "pentamesh: run.debug_kill_step: SIGKILL after step %lld (world rank %d)\n",
                 static_cast<long long>(step), trainer.rank());
    std::fflush(stderr);
    raise(SIGKILL);
  }
}

// The newest checkpoint saved before `step`: its weights gave a finite loss (the checkpoint of
// the step whose loss was not finite is suspect). "" when there is none.
std::string LastGoodCheckpoint(const std::string& root, int64_t step) {
  if (root.empty()) return "";
  for (const std::string& d : ckpt::ListCheckpoints(root)) {  // newest first
    const std::optional<int64_t> saved = ckpt::StepOfDir(d);
    if (saved && *saved < step) return d;
  }
  return "";
}

// A skipped step: reported and logged; more than run.max_nonfinite_in_row in a row is the
// divergence error.
core::Status OnNonFinite(const StepStats& s, Trainer& trainer, ckpt::AsyncSaver& saver,
                         MetricsWriter* metrics, RunObserver& observer) {
  const RunConfig& c = trainer.config();
  const char* cause = std::isfinite(s.ce_loss) ? "gradient norm" : "loss";
  observer.OnWarning(fmt::format("step {} skipped: non-finite {} ({} in a row, {} in this run)",
                                 s.step + 1, cause, s.nonfinite_in_row, trainer.nonfinite_total()));
  if (metrics) PM_RETURN_IF_ERROR(metrics->WriteSkipped(s));
  if (s.nonfinite_in_row <= c.run.max_nonfinite_in_row) return core::Status::Ok();
  const core::Status st = saver.Wait();
  const std::string good = LastGoodCheckpoint(c.ckpt.dir, s.step);
  return core::Status::Error(fmt::format(
      "training diverged: {} non-finite steps in a row (run.max_nonfinite_in_row={}), the last at "
      "step {} with a non-finite {} (lr {:.3g}); stopping after step {}. {}{}",
      s.nonfinite_in_row, c.run.max_nonfinite_in_row, s.step + 1, cause, s.lr, s.step,
      good.empty()
          ? std::string("No checkpoint before the divergence was saved.")
          : fmt::format("The last good checkpoint is {} (resume with --resume {})", good, good),
      st.ok() ? "" : "; " + st.message()));
}

core::Status WriteTrace(Trainer& trainer, const std::string& path, RunObserver& observer) {
  const std::string json = trainer.GatherTrace();  // collective: every rank
  if (trainer.rank() != 0) return core::Status::Ok();
  if (const core::Status st = core::WriteFileAtomic(path, json); !st.ok())
    return core::Status::Error("--trace: " + st.message());
  observer.OnInfo(fmt::format("trace: {} (Chrome trace-event JSON; open in Perfetto)", path));
  return core::Status::Ok();
}

// Resumes when asked; every rank loads its own shard, and all continue only if all succeeded.
// The line printed says where from and how long it took (every rank's restore done).
core::Status ResumeEverywhere(Trainer& trainer, const LoopOptions& options,
                              const ckpt::AllOk& all_ok, MemoryCheckpointer* memory,
                              RunObserver& observer) {
  if (options.resume.empty()) return core::Status::Ok();
  const auto start = std::chrono::steady_clock::now();
  const core::Result<Resumed> r = Resume(options.resume, trainer, observer, memory);
  const bool all = all_ok ? all_ok(r.ok()) : r.ok();
  if (!r.ok()) return r.status();
  if (!all) return core::Status::Error("resume failed on another rank (see its message)");
  if (trainer.rank() == 0 && !r->damaged.empty()) {
    // Every rank has read what it needed: the damaged ones are kept aside, never pruned.
    const auto moved = ckpt::SetAsideDamaged(r->damaged);
    if (!moved.ok())
      observer.OnWarning("keeping the damaged checkpoints aside: " + moved.status().message());
    else
      observer.OnWarning(fmt::format("kept the damaged checkpoint{} as {} (never pruned)",
                                     moved->size() > 1 ? "s" : "", fmt::join(*moved, ", ")));
  }
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  observer.OnInfo(r->restored ? fmt::format("{}; restore took {:.3f} s", r->what, took_s)
                              : r->what);
  return core::Status::Ok();
}

// Rank 0 claims ckpt.dir (ckpt/owner.h) and every rank learns the run id: the manifest's
// state.run_id and the key of the in-memory copies. Without ckpt.dir a run gets a new id.
core::Result<std::string> ClaimRun(const Trainer& trainer, const LoopOptions& options,
                                   const ckpt::AllOk& all_ok) {
  const std::string& root = trainer.config().ckpt.dir;
  core::Result<std::string> id = ckpt::NewRunId();
  if (trainer.rank() == 0 && !root.empty())
    id = ckpt::ClaimRoot(
        root, {.resume = !options.resume.empty(), .overwrite = options.overwrite, .env = nullptr});
  const bool all = all_ok ? all_ok(id.ok()) : id.ok();
  if (!id.ok()) return id.status();
  if (!all) return core::Status::Error("rank 0 could not claim ckpt.dir (see its message)");
  std::string run_id = *id;
  if (options.world != nullptr && options.world->size() > 1) {
    run_id.resize(16);
    options.world->broadcast(run_id.data(), 16, core::Dtype::kU8, 0);
  }
  return run_id;
}

}  // namespace

core::Result<RunSummary> RunTraining(Trainer& trainer, const LoopOptions& options,
                                     RunObserver* observer_or_null) {
  RunObserver& observer = observer_or_null ? *observer_or_null : Silent();
  const RunConfig& c = trainer.config();
  const bool lead = trainer.rank() == 0;
  const int64_t start_step = trainer.step();
  const ckpt::AllOk all_ok = AllOkOver(options.world);
  PM_ASSIGN_OR_RETURN(const std::string run_id, ClaimRun(trainer, options, all_ok));
  std::optional<MemoryCheckpointer> memory;
  if (c.ckpt.memory_interval > 0) {
    PM_ASSIGN_OR_RETURN(
        MemoryCheckpointer m,
        MemoryCheckpointer::Create(trainer, options.world, options.shm_root, run_id,
                                   [&](const std::string& line) { observer.OnInfo(line); }));
    memory.emplace(std::move(m));
  }
  MemoryCheckpointer* mem = memory ? &*memory : nullptr;
  PM_RETURN_IF_ERROR(ResumeEverywhere(trainer, options, all_ok, mem, observer));
  ckpt::AsyncSaver saver(
      {.root = c.ckpt.dir, .keep = static_cast<int>(c.ckpt.keep), .env = nullptr, .all_ok = all_ok},
      c.ckpt.async);
  std::optional<MetricsWriter> metrics;
  if (lead && !c.run.out_dir.empty()) {
    PM_ASSIGN_OR_RETURN(MetricsWriter w,
                        MetricsWriter::Open(c.run.out_dir, trainer.step() > start_step));
    metrics.emplace(std::move(w));
  }
  RunSummary sum;
  std::vector<double> step_times_s;  // completed steps after the first
  const int64_t total = trainer.total_steps(), first_step = trainer.step();
  const int world_size = options.world ? options.world->size() : 1;
  if (!options.trace.empty()) trainer.set_tracing(true);
  while (trainer.step() < total) {
    StepStats s = trainer.Step();
    sum.elapsed_s += s.step_time_s;
    if (s.skipped) {
      PM_RETURN_IF_ERROR(OnNonFinite(s, trainer, saver, metrics ? &*metrics : nullptr, observer));
      continue;
    }
    if (s.loss_spike && lead)
      observer.OnWarning(fmt::format("step {}: loss spike {:.4g} > {} x median {:.4g}", s.step,
                                     s.loss, c.run.spike_factor, s.loss_median));
    if (s.step > first_step + 1 || total == first_step + 1) step_times_s.push_back(s.step_time_s);
    MaybeSave(trainer, saver, mem,
              options.process_first_step >= 0 ? options.process_first_step : first_step, world_size,
              run_id, observer);
    const bool eval_now =
        s.step == total || (c.run.eval_every > 0 && s.step % c.run.eval_every == 0);
    if (eval_now) sum.last_eval = *(s.eval_loss = trainer.Evaluate());
    for (size_t t = 0; t < sum.peak_bytes.size(); ++t)
      sum.peak_bytes[t] = std::max(sum.peak_bytes[t], s.peak_bytes[t]);
    sum.peak_bytes_total = std::max(sum.peak_bytes_total, s.peak_bytes_total);
    if (metrics)
      PM_RETURN_IF_ERROR(metrics->Write(s, &trainer.predicted(), trainer.flops_per_token()));
    const double eta = sum.elapsed_s / static_cast<double>(s.step - first_step) *
                       static_cast<double>(total - s.step);
    observer.OnStep(s, total, eta, eval_now);
  }
  if (!options.trace.empty()) PM_RETURN_IF_ERROR(WriteTrace(trainer, options.trace, observer));
  // The last checkpoint is the run's result: a run that could not save it has failed (its
  // in-memory copies, if any, are kept: they may be the only copy of the final state).
  if (const core::Status saved = saver.Wait(); !saved.ok())
    return core::Status::Error(fmt::format("the run's last checkpoint (step {}) was not saved: {}",
                                           total, saved.message()));
  if (mem != nullptr) mem->RemoveAll();  // a clean finish: the copies are not needed any more
  sum.steps = total - first_step;
  if (!step_times_s.empty()) sum.step_time_median_s = Median(step_times_s);
  if (metrics) sum.metrics_path = metrics->path();
  return sum;
}

}  // namespace pentamesh::train
