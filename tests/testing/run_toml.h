// A run config as TOML text (namespace pentamesh::testing): RunTomlText(run), with what the tests
// vary in RunToml. The defaults are the small run the CLI and checkpoint tests train on the test
// corpus (vocab 512, 32-token sequences, seed 7); reference_run.h's TinyRunToml is the tiny model
// of the mpirun equivalence tests in the same form. Fixed: hidden 32, FFN 64, one thread.
// Invariant: the text holds exactly the keys RunToml names (optional ones left out when empty or
// 0), so a test reads as the config it trains.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace pentamesh::testing {

// (Every field has a default, so designated initializers may name only what they set.)
struct RunToml {
  std::string name = "t";
  int layers = 2;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 0;  // 0 leaves it out (hidden / heads)
  int vocab = 512;
  int seq_len = 32;             // train.seq_len and model.max_seq_len
  std::string model_keys = "";  // more [model] lines (or a [model.moe] table)
  int global_batch_seqs = 4;
  std::string precision = "fp32";
  int64_t total_tokens = 1024;
  std::string optim = "lr = 1e-2\nmin_lr = 1e-3\nwarmup_steps = 2";  // the [optim] table
  std::string dataset = "";
  int seed = 7;
  std::string layout = "mbs=2";  // run.layout; "" leaves it out (the default layout)
  std::string run_keys = "";     // more [run] lines
  std::string tables = "";       // further tables, e.g. "[ckpt]\ndir = ..."
};

inline std::string RunTomlText(const RunToml& run) {
  return fmt::format(R"(
[model]
name = "{}"
layers = {}
hidden = 32
heads = {}
kv_heads = {}
{}ffn_hidden = 64
vocab = {}
max_seq_len = {}
{}
[train]
seq_len = {}
global_batch_seqs = {}
precision = "{}"
total_tokens = {}
[optim]
{}
[data]
dataset = "{}"
[run]
seed = {}
{}threads = 1
{}
{}
)",
                     run.name, run.layers, run.heads, run.kv_heads,
                     run.head_dim > 0 ? fmt::format("head_dim = {}\n", run.head_dim) : "",
                     run.vocab, run.seq_len, run.model_keys, run.seq_len, run.global_batch_seqs,
                     run.precision, run.total_tokens, run.optim, run.dataset, run.seed,
                     run.layout.empty() ? "" : fmt::format("layout = \"{}\"\n", run.layout),
                     run.run_keys, run.tables);
}

}  // namespace pentamesh::testing
