// Pipeline executor: runs this pp rank's schedule::Program (F, B, W actions) against its model
// chunks (one model::Stage per virtual stage it holds), with activations and their gradients moved
// point-to-point on the pp Communicator.
//
// p2p contract (docs/pipeline.md): the transfers are the ones schedule::ExpandComm derives from
// the program: receive before F of a stage s > 0 (activation of s-1) and before B of s < S-1
// (gradient of s+1), send after F of s < S-1 and after B of s > 0. Sends are non-blocking
// (Communicator::post_send stages a copy), receives block, exactly the simulator's model, so a
// program set that schedule::Simulate completes cannot deadlock here. Each message carries the
// unique tag 1 + kind + 2 * (mb + m * producing_stage), so matching never depends on posting
// order. A transfer between two stages on the same rank (ZB-V's turn) is a local hand-over.
//
// Invariant: one Run() executes every action of the program once; after it every stash is freed,
// every send completed, and the grads hold the sum over the step's micro-batches.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/allocator.h"
#include "model/stage.h"
#include "schedule/generate.h"
#include "schedule/simulate.h"
#include "train/optimizer.h"

namespace pentamesh::train {

// One event of the Chrome trace-event format ("X" complete events; time in microseconds of the
// host's steady clock, comparable across the processes of one host).
struct TraceEvent {
  std::string name;  // "F3", "F3.1", "recv F3", "send B2"
  std::string cat;   // "F", "B", "W" (compute) or "p2p"
  double ts_us = 0, dur_us = 0;
  int microbatch = 0, chunk = 0;
  int64_t bytes = 0;  // p2p payload
};

// Wall-clock timing of one Run on this rank (steady clock, microseconds), kept whether or not
// tracing is on: the step's span and the compute time of its F, B and W actions.
struct ActionTiming {
  double start_us = 0;              // before the first action (its receive included)
  double end_us = 0;                // after the last action (before waiting for outstanding sends)
  std::array<double, 3> busy_us{};  // F, B, W compute, summed (receives and sends excluded)
  std::array<int64_t, 3> count{};   // F, B, W actions run
};

struct PipelineStepResult {
  double loss_sum = 0;  // summed cross-entropy of the last stage's micro-batches (0 elsewhere)
  int64_t valid_tokens = 0;
  model::MoeStats moe;  // summed over this rank's chunks
  ActionTiming timing;  // Run only
};

// The measured pipeline bubble of one step next to the simulator's (metrics.jsonl "bubble",
// "bubble_simulated", "pipeline_action_s"). measured: with every rank's ActionTiming averaged per
// pp rank (over its dp/cp/tp replicas), makespan = latest end - earliest start over the pp ranks,
// and the bubble = mean over pp ranks of (makespan - busy) / makespan: idle time includes waiting
// for receives, the p2p copies and the warm-up and cool-down gaps. simulated: schedule::Simulate of
// the same programs, each stage's F, B and W costing its rank's measured mean durations, with no
// p2p latency (the copies are what the measured bubble has on top). Both are fractions of the
// pipeline's makespan, idle / makespan, as schedule::SimResult::bubble_fraction.
struct PipelineBubble {
  int microbatches = 0;
  double measured = 0;
  double simulated = 0;
  double time_f_s = 0, time_b_s = 0, time_w_s = 0;  // mean action durations over all ranks
};

// Collective over `world` (every rank calls it with its pp rank and its Run's timing; the world
// is not a mesh group, so this is not in comm_bytes): the step's PipelineBubble, the same on
// every rank. REQUIRES: ValidateSchedule(spec).ok().
PipelineBubble MeasureBubble(comm::Communicator& world, int pp_rank,
                             const schedule::ScheduleSpec& spec, const ActionTiming& mine);

class PipelineExecutor {
 public:
  // chunks[c] is this rank's stage for model chunk c (virtual stage topology().Stage(rank, c)).
  // REQUIRES: ValidateSchedule(spec).ok(), pp.size() == spec.pp, chunks.size() == V.
  PipelineExecutor(const schedule::ScheduleSpec& spec, comm::Communicator& pp,
                   std::vector<model::Stage*> chunks, core::Allocator& alloc);

  // Runs the program over the step's micro-batches (the same list on every rank; a rank reads
  // tokens only on the first stage and targets only on the last). hidden: the model's hidden.
  PipelineStepResult Run(const std::vector<model::MicroBatch>& mbs, int64_t hidden);
  // Forward only (evaluation): every (micro-batch, stage) in GPipe order, each stash dropped
  // after its forward; the same p2p contract and tags as Run, so it cannot deadlock either.
  PipelineStepResult Forward(const std::vector<model::MicroBatch>& mbs, int64_t hidden);
  // Sequence parallel: sums every chunk's norm weight grads over tp (model::Stage::
  // ReduceSequenceParallelGrads, one all-reduce for all chunks); once per step after Run,
  // before the grads are read.
  void ReduceSequenceParallelGrads() { model::Stage::ReduceSequenceParallelGrads(chunks_); }

  const schedule::Program& program() const { return program_; }
  const schedule::Topology& topology() const { return topology_; }
  comm::Communicator& pp() { return pp_; }
  // Events of every Run so far when tracing is on.
  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<TraceEvent>& trace() const { return trace_; }

 private:
  // Checks the micro-batch count against the schedule and sizes the p2p buffers of this step.
  void BeginStep(const std::vector<model::MicroBatch>& mbs, int64_t hidden);
  int Tag(bool gradient, int microbatch, int stage) const;
  void Receive(core::Buffer& into, bool gradient, int microbatch, int stage, int chunk);
  void Send(const core::Buffer& from, bool gradient, int microbatch, int stage, int chunk);
  void Record(const std::string& name, const std::string& cat, double start_us, int mb, int chunk,
              int64_t bytes);
  // Runs one F, B or W action of the program (with its receive and send).
  void RunAction(const schedule::Action& a, const std::vector<model::MicroBatch>& mbs,
                 PipelineStepResult& result);

  schedule::ScheduleSpec spec_;
  schedule::Topology topology_;
  comm::Communicator& pp_;
  std::vector<model::Stage*> chunks_;
  core::Allocator& alloc_;
  schedule::Program program_;
  std::vector<std::vector<bool>> split_;  // [chunk][mb]: the program holds W(mb, chunk)
  std::map<int, core::Buffer> local_;     // same-rank hand-overs, by tag
  int64_t tokens_ = 0, hidden_ = 0;       // per micro-batch
  bool tracing_ = false;
  std::vector<TraceEvent> trace_;
};

// Layers [first, last) of virtual stage `stage` of `stages` (spec::ChunkLayers' uneven split);
// the embedding lives on stage 0 and the head on stage stages-1.
model::StageConfig ChunkConfig(model::StageConfig base, int stage, int stages);

// Steady-clock microseconds (the trace's time base).
double NowUs();

// Chrome trace JSON of every rank's events, gathered over `group` to its rank 0 (pid = the group
// rank, named "<group> rank R"; tid 0: compute, tid 1: p2p, tid 2: collectives, cat
// "collective"). Returns the JSON text on group rank 0 and an empty string elsewhere. Collective
// over the group.
std::string GatherChromeTrace(comm::Communicator& group, const std::vector<TraceEvent>& events);

}  // namespace pentamesh::train
