// Small hand-made specs for the cost tests: numbers small enough to derive every term by hand.
#pragma once

#include "cost/cost.h"
#include "spec/load_toml.h"

namespace pentamesh::cost::testing {

// A GPT-style decoder (MHA, GELU, FFN 4h): the architecture of Korthikanti et al. 2022.
inline spec::ModelSpec GptTiny() {
  spec::ModelSpec m;
  m.name = "gpt-tiny";
  m.layers = 4;
  m.hidden = 64;
  m.heads = 8;
  m.kv_heads = 8;
  m.head_dim = 8;
  m.ffn_hidden = 256;
  m.vocab = 1000;
  m.max_seq_len = 512;
  m.activation = spec::Activation::kGeLU;
  m.tied_embeddings = true;
  return m;
}

// A Llama-style MoE: GQA, SwiGLU, first layer dense, 8 experts top-2.
inline spec::ModelSpec MoeTiny() {
  spec::ModelSpec m;
  m.name = "moe-tiny";
  m.layers = 4;
  m.hidden = 64;
  m.heads = 8;
  m.kv_heads = 4;
  m.head_dim = 8;
  m.ffn_hidden = 128;
  m.vocab = 1000;
  m.max_seq_len = 512;
  m.activation = spec::Activation::kSwiGLU;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 32;
  m.moe.first_dense_layers = 1;
  m.moe.capacity_factor = 0.0;
  return m;
}

// `gpus` GPUs in nodes of 8 (or one partial node), with huge memory so everything fits.
inline spec::ClusterSpec Cluster(int64_t gpus, double hbm_gb = 1e6) {
  spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", gpus);
  c.hbm_gb = hbm_gb;
  return c;
}

inline spec::TrainSpec Train(int64_t seq, int64_t seqs_per_step) {
  spec::TrainSpec t;
  t.name = "tiny";
  t.seq_len = seq;
  t.global_batch_tokens = seq * seqs_per_step;
  t.total_tokens = 1e9;
  t.usd_per_gpu_hour = 2.0;
  return t;
}

}  // namespace pentamesh::cost::testing
