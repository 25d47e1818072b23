// The run loop of `pentamesh train` and of the tests that train end to end: resume (from "auto",
// the newest intact in-memory copy or checkpoint under ckpt.dir, or a named one; every rank loads
// its shard and all go on only if all succeeded; the line says where from and how long it took),
// optimizer steps to train.steps, held-out evaluation every run.eval_every steps and at the end,
// checkpoints every ckpt.interval steps and at the end (each rank writes its shard in the
// background; a failed save is a warning and the previous checkpoint stays intact, a failed last
// save ends the run with an error), in-memory
// copies every ckpt.memory_interval steps (train/memory_checkpoint.h; removed at a clean finish),
// metrics.jsonl on rank 0, the --trace gather, and the run.debug_kill_step fault injection. A
// skipped (non-finite) step is reported and logged; more than run.max_nonfinite_in_row in a row end
// the run with an error naming the cause, the step and the last good checkpoint (divergence is an
// outcome of training, not a crash). What the loop has to say goes to a RunObserver; the loop
// itself prints nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "core/mem_tag.h"
#include "core/status.h"
#include "train/trainer.h"

namespace pentamesh::train {

// What the loop reports while it runs (rank 0 and the others alike; the caller decides who
// prints). Default: nothing.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Progress that is not a step: the resume's outcome, where the trace went.
  virtual void OnInfo(const std::string& /*message*/) {}
  // Something the user should know that does not stop the run (a failed save, a skipped step, a
  // loss spike, a checkpoint that cannot be read and was passed over).
  virtual void OnWarning(const std::string& /*message*/) {}
  // A good step; eta_s is the time left at the mean step time so far; `evaluated` when
  // s.eval_loss was measured after it.
  virtual void OnStep(const StepStats& /*s*/, int64_t /*total_steps*/, double /*eta_s*/,
                      bool /*evaluated*/) {}
};

struct LoopOptions {
  std::string resume;                   // "", "auto" or a checkpoint directory
  std::string trace;                    // Chrome trace-event JSON written by rank 0 ("" = none)
  comm::Communicator* world = nullptr;  // null on one process
  // Where in-memory copies go (ckpt.memory_interval > 0): node-local memory that outlives the
  // process.
  std::string shm_root = "/dev/shm";
  // A fresh run (resume "") in a ckpt.dir holding another run's checkpoints replaces them instead
  // of refusing (ckpt/owner.h).
  bool overwrite = false;
  // The step this process began at, when it ran other runs before this one (`train --recipe`:
  // one run per phase); -1 = this run's first step. run.debug_kill_step fires only in a process
  // that began at step 0, so a relaunch with --resume goes on.
  int64_t process_first_step = -1;
};

struct RunSummary {
  int64_t steps = 0;  // optimizer steps done by this process (after the resume point)
  double elapsed_s = 0;
  // Median time of this run's completed steps after its first (the first pays one-time costs:
  // page faults, BLAS thread start-up); the first step's time with a single step. 0 = none.
  double step_time_median_s = 0;
  double last_eval = 0;                                  // held-out loss after the last step
  std::array<int64_t, core::kMemTagCount> peak_bytes{};  // per tag, over the whole run
  int64_t peak_bytes_total = 0;
  std::string metrics_path;  // "" when none was written
};

// Runs `trainer` to its last step. First rank 0 claims ckpt.dir for this run (ckpt/owner.h: a
// fresh run in another run's ckpt.dir is refused naming it, unless options.overwrite); the run id
// goes into every manifest and keys the in-memory copies. Errors (a claim refused, a failed
// resume, every checkpoint damaged, an unwritable metrics file or trace, a divergence, the last
// checkpoint not saved) come back as a Status whose message says what happened.
core::Result<RunSummary> RunTraining(Trainer& trainer, const LoopOptions& options,
                                     RunObserver* observer = nullptr);

}  // namespace pentamesh::train
