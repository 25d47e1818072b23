// RunConfig: everything `pentamesh train` needs, loaded from one TOML file.
//   [model]  the ModelSpec, read by spec::ModelFromTomlText (a run file's [model] is a model spec)
//   [train]  the planner's TrainSpec keys, read by spec::TrainFromTomlText: seq_len,
//            global_batch_seqs | global_batch_tokens, precision (fp32 | bf16), total_tokens
//   [optim]  lr, min_lr, warmup_steps, beta1, beta2, eps, weight_decay, grad_clip,
//            aux_loss_coef, z_loss_coef, bias_update_rate
//   [data]   dataset (a tokenized dataset directory), corpus (text, or .xz-compressed text
//            unpacked into the dataset directory first; when the dataset directory
//            has no manifest, the tokenizer is trained and the corpus tokenized into it),
//            heldout_fraction, split_seed
//   [run]    seed, steps (0 = total_tokens / global batch tokens), lr_steps, data_start_step
//            (a recipe's phases: the LR schedule's length and where a data order begins), layout
//            (the planner's layout string, e.g. "mbs=4 recompute=selective"), out_dir, eval_every,
//            eval_batches, log_every, threads, peak_gflops, mem_gbps (the host's peak for
//            MFU/prediction), host_profile (a measured host: `pentamesh calibrate --host`; unset:
//            this host measured once and cached, train/host_cache.h; "none": the nominal numbers),
//            memory_limit_bytes (per rank; 0 = none), max_nonfinite_in_row, spike_factor,
//            spike_window, debug_nan_step, debug_nan_count, debug_kill_step, debug_kill_rank
//            (faults)
//   [ckpt]   dir, interval (steps; 0 = only at the end), keep, async, memory_interval (in-memory
//            replicated copies every N steps, 0 = off), memory_key (docs/checkpoint_format.md)
// Overrides "table.key=value" (value in TOML syntax; bare words are strings) are applied to the
// parsed TOML before any loader runs, so they go through exactly the same checks.
// Invariant: every unknown key and every invalid value is reported, all at once, by field name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "core/status.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"
#include "train/host_profile.h"
#include "train/optimizer.h"

namespace pentamesh::train {

struct OptimConfig {
  double lr = 3e-3;      // peak learning rate
  double min_lr = 3e-4;  // cosine floor
  int64_t warmup_steps = 20;
  AdamWConfig adamw;            // optim.beta1, beta2, eps, weight_decay, grad_clip
  double aux_loss_coef = 0.01;  // MoE load-balancing alpha
  double z_loss_coef = 0.0;     // MoE router z-loss beta
  double bias_update_rate = 0;  // MoE aux-loss-free balancing step gamma (DeepSeek-V3); 0 = off
};

struct DataConfig {
  std::string dataset;  // directory with manifest.json
  std::string corpus;   // optional: text to build the dataset from when it is missing
  double heldout_fraction = 0.01;
  uint64_t split_seed = 1234;
};

struct RunOptions {
  uint64_t seed = 1234;
  int64_t steps = 0;  // 0 = train.total_tokens / train.global_batch_tokens
  // The learning-rate schedule's length in steps (warmup, then cosine to min_lr at this step);
  // 0 = the run's steps. `train --recipe` sets it to the whole recipe's steps.
  int64_t lr_steps = 0;
  // The step at which this run's data order begins: resumed from a checkpoint of exactly this
  // step, the run reads its order from the first sequence instead of the saved position (which
  // may be an order of another sequence length). 0 = always the saved position. `train --recipe`
  // sets it at each phase that changes the sequence length.
  int64_t data_start_step = 0;
  spec::Layout layout;       // only mbs and recompute may differ from 1 on one process
  std::string out_dir;       // metrics.jsonl goes here; empty = no file
  int64_t eval_every = 50;   // steps; 0 = only at the end
  int64_t eval_batches = 8;  // held-out batches per evaluation
  int64_t log_every = 1;
  int threads = 0;           // BLAS threads; 0 = OpenBLAS default
  double peak_gflops = 100;  // this host's dense fp32 peak, for MFU and the cost model
  double mem_gbps = 20;      // this host's memory bandwidth, for the cost model
  // run.host_profile: a file from `pentamesh calibrate --host`; when set, its measured GEMM rate,
  // GEMM form and bandwidth replace peak_gflops and mem_gbps (setting both is an error).
  // Without run.host_profile, run.peak_gflops and run.mem_gbps in the TOML, the job measures this
  // host once and caches it (auto_host_profile, train/host_cache.h); run.host_profile = "none"
  // keeps the nominal numbers. Configs built in code start with auto_host_profile false.
  std::string host_profile;
  bool auto_host_profile = false;
  std::optional<HostProfile> host;
  // Ranks sharing this host's peak and bandwidth (not a TOML key: `pentamesh train` sets it from
  // MPI; 0 = every rank of the layout, all on one host).
  int ranks_per_host = 0;
  // Memory cap per rank in bytes (0 = none). Trainer::Create refuses a run whose predicted memory
  // (the cost model's categories for this rank's stage) exceeds it, before allocating anything;
  // at run time the allocator enforces it (core::Allocator::set_limit_bytes).
  int64_t memory_limit_bytes = 0;
  // A step whose loss or grad norm is not finite is skipped (no update); more than this many in
  // a row stop the run.
  int64_t max_nonfinite_in_row = 5;
  // A good step whose loss exceeds spike_factor x the median of the previous spike_window good
  // losses is reported as a loss spike (stderr and metrics.jsonl "loss_spike"); 0 = off.
  double spike_factor = 3.0;
  int64_t spike_window = 32;
  // Fault injection: attempts [debug_nan_step, debug_nan_step + debug_nan_count) (1-based step
  // attempts) get a NaN written into the first gradient before the norm. 0 = off.
  int64_t debug_nan_step = 0;
  int64_t debug_nan_count = 1;
  // Fault injection: the process SIGKILLs itself right after optimizer step debug_kill_step
  // (while an async checkpoint may be in flight), only in a run that started at step 0 (so a
  // relaunch with --resume continues). 0 = off.
  int64_t debug_kill_step = 0;
  // Under mpirun: only this world rank kills itself (the others are then inside the next
  // step's collectives); -1 = every rank.
  int64_t debug_kill_rank = -1;
};

struct CkptConfig {
  std::string dir;       // checkpoint root; empty = no checkpoints
  int64_t interval = 0;  // save every `interval` steps; 0 = only at the end of the run
  int64_t keep = 3;      // complete checkpoints kept
  bool async = true;     // write on a background thread while training continues
  // In-memory replicated copies (train/memory_checkpoint.h): every memory_interval steps each
  // rank writes its state to /dev/shm and to its partner on another node; 0 = off.
  int64_t memory_interval = 0;
  // The job key of those copies (/dev/shm/pentamesh-<key>); "" = derived from dir's path.
  std::string memory_key;
};

struct RunConfig {
  spec::ModelSpec model;
  spec::TrainSpec train;
  OptimConfig optim;
  DataConfig data;
  RunOptions run;
  CkptConfig ckpt;
  std::string toml;  // the merged TOML text (overrides applied), saved in checkpoints
  int64_t total_steps() const {
    return run.steps > 0 ? run.steps
                         : static_cast<int64_t>(train.total_tokens /
                                                static_cast<double>(train.global_batch_tokens));
  }
  // The learning-rate schedule's length: run.lr_steps, else the run's steps.
  int64_t schedule_steps() const { return run.lr_steps > 0 ? run.lr_steps : total_steps(); }
};

// Applies "a.b.c=value" overrides to TOML text and returns the new text.
core::Result<std::string> ApplyOverrides(const std::string& text, const std::string& source,
                                         const std::vector<std::string>& overrides);
core::Result<RunConfig> RunConfigFromToml(const std::string& text, const std::string& source,
                                          const std::vector<std::string>& overrides = {});
core::Result<RunConfig> LoadRunConfig(const std::string& path,
                                      const std::vector<std::string>& overrides = {});

// Makes `o` describe the measured host `h` (what run.host_profile does): o.host = h, and its
// large-GEMM rate and triad bandwidth replace run.peak_gflops and run.mem_gbps.
void UseHostProfile(RunOptions& o, const HostProfile& h);

}  // namespace pentamesh::train
