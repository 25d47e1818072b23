// Tiny specs shared by the planner's tests: small enough that brute force over the whole space
// runs in well under a second, varied enough to exercise every axis (MoE for EP, GQA for Ulysses).
#pragma once

#include "spec/cluster_spec.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::plan::testing {

inline spec::ModelSpec TinyDense() {
  spec::ModelSpec m;
  m.name = "tiny-dense";
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

inline spec::ModelSpec TinyMoe() {
  spec::ModelSpec m = TinyDense();
  m.name = "tiny-moe";
  m.layers = 8;
  m.kv_heads = 4;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 512;
  return m;
}

// hbm_gb small enough that part of the space does not fit.
inline spec::ClusterSpec Cluster(int64_t gpus_per_node, int64_t nodes, double hbm_gb = 16) {
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

inline spec::TrainSpec Train(int64_t seq_len, int64_t seqs) {
  spec::TrainSpec t;
  t.name = "test";
  t.seq_len = seq_len;
  t.global_batch_tokens = seq_len * seqs;
  t.total_tokens = 1e9;
  t.usd_per_gpu_hour = 2;
  return t;
}

}  // namespace pentamesh::plan::testing

#include "cost/cost.h"

namespace pentamesh::plan::testing {

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

}  // namespace pentamesh::plan::testing
