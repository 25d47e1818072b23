// Measured training runs as the cost model sees them: each published row (the format of
// bench/data/published_runs.json, documented in bench/data/README.md) mapped to a model, a cluster,
// a train spec, a layout and the facts of the software that ran it, with the throughput it
// measured. The mapping is the one place that reads the sources' words ("FSDP FULL_SHARD",
// "distributed optimizer", "vpp", "float8 linears", ...); docs/COST_MODEL.md ("Published runs")
// states every rule.
// Invariant: a Run is either usable (the estimate can be compared with `tokens_per_s_gpu`) or
// carries `unusable` = why not; bad data (a non-positive number, a wrong type) is an error naming
// the row id and the field, never a silently skipped row.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::calib {

// What a row says about the implementation that ran it: facts of the run, applied to the stack's
// cost parameters (calib/profile.h ApplyFacts). None of them is fitted.
struct RunFacts {
  bool flash_attention = true;  // false before FlashAttention (Megatron 2021-22): scores stored
  bool fp32_grads = false;      // fp32 main gradients reduced over DP (Megatron 2021-22, Llama 3)
  bool dropout = false;         // GPT-3-era configs stash dropout masks
  bool grad_overlap =
      true;  // DP reduction overlapped with backward (false: Megatron 2021 local DDP)
  bool tp_comm_overlap = false;  // Megatron --tp-comm-overlap, torchtitan async TP
  bool compiled = false;         // torch.compile / XLA: elementwise kernels fused
  bool fp8 = false;              // FP8 GEMMs (Transformer Engine, torchao float8 linears)
  bool fp8_rowwise = false;      // FP8 with row-wise scales (torchao "rowwise"): other kernels
  // Transformer Engine casts the FP8 weights on a step's first micro-batch and reuses them
  // (Megatron passes is_first_microbatch); torchao's float8 linears cast them at every call.
  bool fp8_weight_cache = false;
  bool fp8_stash_gemm_inputs = false;  // cost::CostParams::fp8_stash_gemm_inputs
  bool pp_p2p_overlap = false;         // cost::CostParams::pp_p2p_overlap
  int64_t fsdp_shard_group = 0;        // HSDP: parameters sharded over this many ranks (0 = all dp)
  // Share of the forward selective recomputation reruns beyond core attention (torchtitan's
  // per-op and per-layer selective checkpointing: 0.5; Megatron's: 0).
  double selective_forward_share = 0;
  bool selective_op_sac = false;        // torchtitan's per-op selective checkpointing policy
  bool unfused_cross_entropy = false;   // eager log-softmax + NLL on fp32 logits (torchtitan)
  bool fsdp_unsharded_with_pp = false;  // FSDP keeps params gathered under PP (torchtitan)
  // PyTorch DTensor TP saves the all-gathered input of column-parallel linears (torchtitan).
  bool tp_saves_gathered_input = false;
  // torch.distributed.pipelining: receive buffers per micro-batch, stage outputs kept.
  bool pp_buffers_per_microbatch = false;
  // Transient workspaces of backward and ring attention (every GPU stack; cost::CostParams).
  bool transient_workspaces = true;
  // DeepEP / HybridEP (Megatron's flex dispatcher): a token crosses to a remote node once.
  bool ep_dispatch_per_node = false;
  // Megatron-Core's EP overlap (--overlap-moe-expert-parallel-comm, Megatron-Bridge's
  // moe_a2a_overlap): the all-to-alls run beside another micro-batch's compute, the fitted
  // ep_overlap share of them hidden; without it they are charged in full.
  bool ep_a2a_overlap = false;
};

struct Run {
  std::string id;
  std::string group;     // source family (leave-one-group-out unit)
  std::string software;  // as published
  std::string stack;     // stack profile: megatron, torchtitan, maxtext, llm-foundry, deepspeed
  std::string sku;  // GPU SKU = cluster preset: a100-40gb, a100-80gb, h100-sxm, h100-hbm2e, h200
  spec::ModelSpec model;
  spec::ClusterSpec cluster;
  spec::TrainSpec train;
  spec::Layout layout;
  RunFacts facts;
  double tokens_per_s_gpu = 0;       // measured throughput per GPU (0 when unusable)
  std::string measured_from;         // the published field it comes from (and the formula, if any)
  std::optional<double> memory_gib;  // published per-GPU memory (torchtitan: max reserved)
  std::vector<std::string> assumptions;  // every value filled in by a default, with the reason
  std::string unusable;                  // empty = usable; else why it cannot be estimated
  size_t index = 0;                      // the row's position in its file (0-based)
  std::string file;                      // the file the row was read from (LoadRuns)
  bool unreadable = false;  // the row's data is malformed (`unusable` names the field and why)
  bool usable() const { return unusable.empty(); }
};

// Reads a JSON array of rows. Only a file that is not JSON or not an array is an error. One bad
// row never sinks the others: a row that cannot be read (not an object, no id, an id used twice,
// a wrong type, a number that is not a positive finite value where one is required) comes back
// with `unreadable` set and `unusable` naming the field and the reason; rows that cannot be
// estimated (no throughput published, a GPU pentamesh has no preset for, degrees that do not
// multiply to the GPU count) come back with `unusable` set. Rows with no id are named "#<index>".
core::Result<std::vector<Run>> LoadRuns(const std::string& path);
// Several runs files read as one set, in order (a calibration set and the rows collected beside
// it). A row whose id an earlier file already used comes back unreadable, naming that file and row;
// only a file that cannot be read, or is not JSON or not an array, is an error.
core::Result<std::vector<Run>> LoadRunFiles(const std::vector<std::string>& paths);
core::Result<std::vector<Run>> RunsFromJson(const nlohmann::json& rows, const std::string& source);

// The run as a row of the format LoadRuns reads (the writer of that format): the fields the
// format has, filled from the run's specs, so that RunsFromJson maps it back to the same model,
// layout and throughput. What the format cannot say (MLA, a sliding window, MoE capacity or
// dense first layers, Ulysses CP, fp32 training) is returned in `dropped`, one sentence each, and
// written to the row's source notes. The schedule is written in the layout's own words, which the
// reader reads back.
nlohmann::json RunRowJson(const Run& run, std::vector<std::string>* dropped = nullptr);

// Appends `row` to the runs file at `path` (a JSON array; a missing file is created) through
// core::WriteFileAtomic. Errors: the file is not a JSON array, or already has a row with the id.
core::Status AppendRunRow(const std::string& path, const nlohmann::json& row);

// The cluster preset for a row's GPU words ("A100-SXM4-80GB", "h100_80gb", "H100 (96GB HBM2e,
// 500W, ...)"); empty when none matches.
std::string SkuForGpu(const std::string& gpu_model, const std::string& gpu_type);
// A preset for GPU words that name a GPU generation or a variant without a preset of its own
// ("Ampere", "Hopper", "Blackwell", "A800", "GH200"), with the assumption that makes it one
// ("" when the words name none). `memory_gb` (0 = unknown) picks A100 40 GB vs 80 GB.
struct SkuGuess {
  std::string sku;
  std::string assumption;
};
SkuGuess GuessSku(const std::string& gpu_model, const std::string& gpu_type, double memory_gb);

// The stack profile for a row's software words; empty when none matches.
std::string StackForSoftware(const std::string& software, const std::string& group);

}  // namespace pentamesh::calib
