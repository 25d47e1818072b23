// The seeds' FSDP baseline (ZeRO-3 over all GPUs: dp = GPUs, no TP/PP/CP/EP) side by side with the
// planner's best layout: memory by component, the longest sequence each can hold, MFU, tokens/s,
// days and cost.
// Invariant: every number comes from cost::EstimateLayout; the baseline is itself a constrained
// plan::Search (over micro-batch and recompute), so it is FSDP at its best.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost.h"
#include "plan/search.h"

namespace pentamesh::plan {

struct BaselineComparison {
  // FSDP at the requested sequence and batch: the best variant that fits. Otherwise FSDP with
  // mbs=1 and full recomputation holding one sequence per rank (so memory is that of the requested
  // sequence even when the batch cannot be split over dp = GPUs), fits = false, and `violations`
  // lists why: the requested batch's structural rules, then memory.
  cost::Estimate fsdp;
  cost::Estimate best;           // the planner's best layout
  int64_t fsdp_max_seq_len = 0;  // longest sequence FSDP holds in memory (0: none)
  int64_t best_max_seq_len = 0;  // the same for the best layout's mesh
  int64_t seq_len_cap = 0;       // the longest sequence tried
  // FSDP at its longest sequence that also meets the batch (when the requested one cannot run):
  // what the FSDP team could actually train, to price the difference.
  std::optional<cost::Estimate> fsdp_runnable;
  int64_t fsdp_runnable_seq_len = 0;
  // FSDP's days and cost for the requested run: its own when it runs; else the same work (the
  // best layout's FLOPs) at the MFU FSDP reaches at fsdp_runnable_seq_len: best.days * best.mfu /
  // fsdp_runnable.mfu (the seeds' own arithmetic: days scale with 1 / MFU for fixed work).
  double fsdp_days = 0;
  double fsdp_usd = 0;
  bool fsdp_priced_at_equal_work = false;
  double days_saved = 0;  // fsdp_days - best.days
  double usd_saved = 0;   // fsdp_usd - best.cost_usd
};

spec::Layout FsdpLayout(int64_t gpus);

// REQUIRES: best fits (from plan::Search on the same specs).
core::Result<BaselineComparison> CompareWithFsdp(const spec::ModelSpec& model,
                                                 const spec::ClusterSpec& cluster,
                                                 const spec::TrainSpec& train,
                                                 const cost::Estimate& best,
                                                 const SearchOptions& options);

// Longest sequence (a power of two, then refined to a multiple of `granule`) at which `layout`
// with mbs=1 and full recomputation fits in memory, the batch holding the layout's micro-batch
// count; 0 when even the shortest does not fit. Memory is monotone in the sequence length.
int64_t LongestSequence(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
                        const spec::TrainSpec& train, const spec::Layout& layout,
                        const cost::CostParams& params, int64_t cap);

}  // namespace pentamesh::plan
