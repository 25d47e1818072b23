// The small run config the CLI and checkpoint tests train on the test corpus (vocab 512), as TOML
// text (namespace pentamesh::testing): CorpusRunToml(run), with what the tests vary in CorpusRun.
// Fixed: hidden 32, 4 heads (2 kv), FFN 64, vocab 512, 32-token sequences, seed 7, one thread.
// Invariant: the text holds exactly the keys CorpusRun names, so a test reads as the config it
// trains (the tiny model of the mpirun equivalence tests is testing/reference_run.h's TinyRun).
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace pentamesh::testing {

// (Every field has a default, so designated initializers may name only what they set.)
struct CorpusRun {
  std::string name = "t";
  int layers = 2;
  std::string model_keys = "";  // more [model] lines (or a [model.moe] table)
  int global_batch_seqs = 4;
  std::string precision = "fp32";
  int64_t total_tokens = 1024;
  std::string optim = "lr = 1e-2\nmin_lr = 1e-3\nwarmup_steps = 2";  // the [optim] table
  std::string dataset = "";
  std::string layout = "mbs=2";  // run.layout; "" leaves it out (the default layout)
  std::string run_keys = "";     // more [run] lines
  std::string tables = "";       // further tables, e.g. "[ckpt]\ndir = ..."
};

inline std::string CorpusRunToml(const CorpusRun& run) {
  return fmt::format(R"(
[model]
name = "{}"
layers = {}
hidden = 32
heads = 4
kv_heads = 2
ffn_hidden = 64
vocab = 512
max_seq_len = 32
{}
[train]
seq_len = 32
global_batch_seqs = {}
precision = "{}"
total_tokens = {}
[optim]
{}
[data]
dataset = "{}"
[run]
seed = 7
{}threads = 1
{}
{}
)",
                     run.name, run.layers, run.model_keys, run.global_batch_seqs, run.precision,
                     run.total_tokens, run.optim, run.dataset,
                     run.layout.empty() ? "" : fmt::format("layout = \"{}\"\n", run.layout),
                     run.run_keys, run.tables);
}

}  // namespace pentamesh::testing
