// The single-process reference of the mpirun equivalence tests (tests/mpi/*_train_test.cc), in
// one header (namespace pentamesh::testing):
//   EnvOr(name, fallback)       the test case's settings from the environment;
//   TinyRunConfig(run, file)    the tiny run config they all train, with what varies in TinyRun;
//   RunSingleProcess(config, n) trains it for n steps in this process and records every step's
//                               loss, grad norm and routed counts, step 1's activation peak, the
//                               held-out loss (optional) and the final fp32 master weights.
// Invariant: the reference is the plain Trainer of one process (no mesh, no world): a distributed
// run of the same config reproduces it up to fp32 summation order.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "testing/run_toml.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace pentamesh::testing {

// $name, or `fallback` when it is unset (the mpirun tests take their case from the environment:
// PM_TEST_LAYOUT, PM_TEST_PRECISION, PM_TEST_MODEL, set per CTest case in
// tests/mpi/CMakeLists.txt).
inline std::string EnvOr(const char* name, const char* fallback) {
  const char* env = std::getenv(name);
  return env ? env : fallback;
}

// What the equivalence tests vary. The rest is fixed: hidden 32, 8 heads (4 kv) of dim 4, FFN 64,
// vocab 64, 16-token sequences, 8 per step, 768 tokens (6 steps), lr 1e-3 to 1e-4 after 2 warm-up
// steps, grad clip 0.5, seed 11, one thread.
// (Every field has a default, so designated initializers may name only what they set.)
struct TinyRun {
  std::string name = "";
  int layers = 2;
  std::string model_keys = "";  // more [model] lines (or a [model.moe] table)
  std::string precision = "fp32";
  std::string optim_keys = "";  // more [optim] lines
  std::string dataset = "";
  std::string layout = "";    // the whole run.layout, e.g. "mbs=2 dp=2 zero=1"
  std::string run_keys = "";  // more [run] lines
};

inline std::string TinyRunToml(const TinyRun& run) {
  return RunTomlText(
      {.name = run.name,
       .layers = run.layers,
       .heads = 8,
       .kv_heads = 4,
       .head_dim = 4,
       .vocab = 64,
       .seq_len = 16,
       .model_keys = run.model_keys,
       .global_batch_seqs = 8,
       .precision = run.precision,
       .total_tokens = 768,
       .optim = "lr = 1e-3\nmin_lr = 1e-4\nwarmup_steps = 2\ngrad_clip = 0.5\n" + run.optim_keys,
       .dataset = run.dataset,
       .seed = 11,
       .layout = run.layout,
       .run_keys = run.run_keys});
}

// The parsed config (`file` names it in errors); a config that does not parse fails the test.
inline train::RunConfig TinyRunConfig(const TinyRun& run, const std::string& file) {
  auto c = train::RunConfigFromToml(TinyRunToml(run), file);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

struct ReferenceRun {
  std::vector<double> losses;
  std::vector<double> grad_norms;            // before clipping
  std::vector<std::vector<int64_t>> routed;  // per step: assignments per expert (MoE; else empty)
  double activations_bytes = 0;              // measured peak of stashed activations, step 1
  double eval_loss = 0;                      // Evaluate() after the last step, when asked for
  std::vector<std::string> names;            // by ParamId of the single-process model
  std::vector<std::vector<float>> weights;   // the final fp32 masters, by ParamId

  // The final weights of the parameter `name`, or nullptr when the model has none.
  const std::vector<float>* Find(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return &weights[i];
    }
    return nullptr;
  }
};

// Trains `config` for `steps` steps as one process (then Evaluate() when `evaluate`).
inline ReferenceRun RunSingleProcess(const train::RunConfig& config, int steps,
                                     bool evaluate = false) {
  ReferenceRun r;
  auto t = train::Trainer::Create(config);
  EXPECT_TRUE(t.ok()) << t.status().message();
  for (int i = 0; i < steps; ++i) {
    const train::StepStats s = (*t)->Step();
    r.losses.push_back(s.loss);
    r.grad_norms.push_back(s.grad_norm);
    r.routed.push_back(s.moe.routed);
    if (i == 0)
      r.activations_bytes =
          static_cast<double>(s.peak_bytes[static_cast<size_t>(core::MemTag::kActivations)]);
  }
  if (evaluate) r.eval_loss = (*t)->Evaluate();
  model::ParamSet& p = (*t)->params();
  const std::vector<float> flat = (*t)->optimizer().FullMaster();
  for (model::ParamId id = 0; id < p.size(); ++id) {
    const float* w = flat.data() + p.info(id).offset;
    r.weights.emplace_back(w, w + p.info(id).numel());
    r.names.push_back(p.info(id).name);
  }
  return r;
}

}  // namespace pentamesh::testing
