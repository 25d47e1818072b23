// The tiny specs every test shares, in three sizes (one header, namespace pentamesh::testing):
//   engine   TinyDense, TinyMoe: runnable in milliseconds on one core (hidden 16, vocab 29);
//            the helpers that run them (batches, forward+backward) are in testing/tiny_model.h.
//   cost     GptTiny, MoeTiny, H100Cluster: numbers small enough to derive every cost term by hand.
//   planner  PlannerDense, PlannerMoe, PlannerCluster, TestCostParams, kHbmGb*: brute force over
//            the whole layout space in well under a second, part fitting and part not.
//   Train(seq, seqs): a training batch of `seqs` sequences of `seq` tokens (all sizes).
// Invariant: specs only (spec/ and cost/ types); nothing here needs the engine.
#pragma once

#include <cstdint>

#include "cost/cost.h"
#include "spec/cluster_spec.h"
#include "spec/load_toml.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::testing {

// ---- engine size ----

inline spec::ModelSpec TinyDense() {
  spec::ModelSpec m;
  m.name = "tiny-dense";
  m.layers = 2;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 4;
  m.ffn_hidden = 24;
  m.vocab = 29;
  m.max_seq_len = 16;
  m.norm_eps = 1e-5;
  m.rope_theta = 10000.0;
  return m;
}

inline spec::ModelSpec TinyMoe() {
  spec::ModelSpec m = TinyDense();
  m.name = "tiny-moe";
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 12;
  m.moe.moe_layer_freq = 1;
  m.moe.first_dense_layers = 1;
  m.moe.shared_experts = 1;
  m.moe.capacity_factor = 0;
  return m;
}

// ---- cost size ----

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
inline spec::ClusterSpec H100Cluster(int64_t gpus, double hbm_gb = 1e6) {
  spec::ClusterSpec c = *spec::LoadCluster("h100-sxm", gpus);
  c.hbm_gb = hbm_gb;
  return c;
}

// ---- planner size ----

inline spec::ModelSpec PlannerDense() {
  spec::ModelSpec m;
  m.name = "planner-dense";
  m.layers = 6;
  m.hidden = 1024;
  m.heads = 8;
  m.kv_heads = 2;
  m.head_dim = 128;
  m.ffn_hidden = 3072;
  m.vocab = 32000;
  m.max_seq_len = 32768;
  return m;
}

inline spec::ModelSpec PlannerMoe() {
  spec::ModelSpec m = PlannerDense();
  m.name = "planner-moe";
  m.layers = 8;
  m.kv_heads = 4;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 512;
  return m;
}

// hbm_gb small enough that part of the space does not fit.
inline spec::ClusterSpec PlannerCluster(int64_t gpus_per_node, int64_t nodes, double hbm_gb = 16) {
  spec::ClusterSpec c;
  c.name = "test";
  c.gpu = "test";
  c.peak_tflops = 100;
  c.hbm_gb = hbm_gb;
  c.hbm_gbps = 1000;
  c.gpus_per_node = gpus_per_node;
  c.nodes = nodes;
  c.intra_node_gbps = 100;
  c.intra_node_latency_us = 3;
  c.nics_per_node = gpus_per_node;
  c.inter_node_gbps = 10;
  c.inter_node_latency_us = 8;
  return c;
}

// HBM sizes at which the tiny spaces are part fitting, part not (checked by the tests).
inline constexpr double kHbmGbMoe = 4;
inline constexpr double kHbmGbDense = 4;

// Small fixed overheads so that the tiny models' memory is dominated by what the layout changes.
inline cost::CostParams TestCostParams() {
  cost::CostParams p;
  p.framework_bytes = 0.2e9;
  p.safety_margin_bytes = 0.2e9;
  return p;
}

// ---- all sizes ----

inline spec::TrainSpec Train(int64_t seq, int64_t seqs_per_step) {
  spec::TrainSpec t;
  t.name = "tiny";
  t.seq_len = seq;
  t.global_batch_tokens = seq * seqs_per_step;
  t.total_tokens = 1e9;
  t.usd_per_gpu_hour = 2.0;
  return t;
}

}  // namespace pentamesh::testing
