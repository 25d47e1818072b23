// cost::Model (the per-spec context) and CheckLayout, the allocation-free twin of spec::Validate.
// Invariant: CheckLayout(ctx, l) == Rule::kOk exactly when spec::Validate(...) returns no message;
// tests/cost/check_layout_test.cc compares the two over a grid of layouts.
#include "cost/cost.h"
#include "spec/validate.h"

namespace pentamesh::cost {

Model::Model(const spec::ModelSpec& model, const spec::ClusterSpec& cluster,
             const spec::TrainSpec& train, const CostParams& params)
    : model_(model), cluster_(cluster), train_(train), params_(params) {
  counts_ = CountParams(model_);
  const double h = static_cast<double>(model_.hidden);
  const double h_attn = static_cast<double>(model_.heads * model_.head_dim);
  const double h_kv = static_cast<double>(model_.kv_heads * model_.head_dim);
  const double mats = model_.activation == spec::Activation::kSwiGLU ? 3.0 : 2.0;
  attn_params_layer = 2.0 * h * h_attn + 2.0 * h * h_kv;
  mlp_params_layer = mats * h * static_cast<double>(model_.ffn_hidden);
  expert_params_one = mats * h * static_cast<double>(model_.moe.expert_ffn_hidden);
  shared_params_layer = static_cast<double>(model_.moe.shared_experts) * expert_params_one;
  router_params_layer = h * static_cast<double>(model_.moe.experts);
  norm_params_layer = 2.0 * h;
  flops_none = Flops(model_, train_.seq_len, spec::Recompute::kNone);
  flops_selective = Flops(model_, train_.seq_len, spec::Recompute::kSelective);
  flops_full = Flops(model_, train_.seq_len, spec::Recompute::kFull);
  const int64_t layers = model_.layers > 0 ? model_.layers : 0;
  moe_prefix_.assign(static_cast<size_t>(layers) + 1, 0);
  for (int64_t l = 0; l < layers; ++l) {
    moe_prefix_[static_cast<size_t>(l) + 1] =
        moe_prefix_[static_cast<size_t>(l)] + (model_.IsMoeLayer(l) ? 1 : 0);
  }
}

const char* RuleName(Rule rule) {
  switch (rule) {
    case Rule::kOk:
      return "ok";
    case Rule::kGpuCount:
      return "product of degrees equals the GPU count";
    case Rule::kTpInNode:
      return "tp divides gpus_per_node (TP inside a node)";
    case Rule::kHeadsTp:
      return "heads divisible by tp";
    case Rule::kKvHeadsTp:
      return "kv_heads divisible by tp";
    case Rule::kFfnTp:
      return "ffn_hidden divisible by tp";
    case Rule::kLayersPp:
      return "layers split over pp * virtual_stages";
    case Rule::kInterleavedPp:
      return "interleaved needs pp >= 2 and V >= 2";
    case Rule::kEpDense:
      return "ep > 1 needs a MoE model";
    case Rule::kExpertsEp:
      return "experts divisible by ep";
    case Rule::kEtp:
      return "etp is tp, or 1 with ep_placement=folded and sp=on";
    case Rule::kEpFolded:
      return "folded ep * etp divides dp * cp * tp";
    case Rule::kExpertFfnTp:
      return "expert_ffn_hidden divisible by tp";
    case Rule::kSeqMax:
      return "seq_len within max_seq_len";
    case Rule::kSeqDivisible:
      return "seq_len divisible by 2*cp (*tp with sp)";
    case Rule::kUlyssesHeads:
      return "ulysses: kv_heads/tp divisible by cp";
    case Rule::kBatch:
      return "global batch divisible by data ranks * mbs";
    case Rule::kInterleavedMicrobatches:
      return "interleaved: micro-batches divisible by pp";
    case Rule::kDegrees:
      return "degrees, mbs and V positive, zero in 0..3";
  }
  return "?";
}

Rule CheckLayout(const Model& ctx, const spec::Layout& l) {
  const spec::ModelSpec& m = ctx.model();
  const spec::ClusterSpec& c = ctx.cluster();
  const spec::TrainSpec& t = ctx.train();
  if (l.dp <= 0 || l.tp <= 0 || l.pp <= 0 || l.cp <= 0 || l.ep <= 0 || l.etp < 0 || l.mbs <= 0 ||
      l.virtual_stages <= 0 || l.zero < 0 || l.zero > 3) {
    return Rule::kDegrees;
  }
  const bool separate = l.ep_placement == spec::EpPlacement::kSeparate;
  if (l.gpus() != c.gpus()) return Rule::kGpuCount;
  if (l.tp > c.gpus_per_node || c.gpus_per_node % l.tp != 0) return Rule::kTpInNode;
  if (m.heads % l.tp != 0) return Rule::kHeadsTp;
  if (m.kv_heads % l.tp != 0) return Rule::kKvHeadsTp;
  if (m.ffn_hidden % l.tp != 0) return Rule::kFfnTp;
  if (spec::ChunkLayers(m.layers, l.pp * l.virtual_stages, 0) < 0) return Rule::kLayersPp;
  const bool interleaved = l.schedule == spec::Schedule::kInterleaved;
  if (interleaved && (l.pp < 2 || l.virtual_stages < 2)) return Rule::kInterleavedPp;
  if (!interleaved && l.virtual_stages != 1) return Rule::kInterleavedPp;
  if (!m.is_moe() && l.ep != 1) return Rule::kEpDense;
  if (m.is_moe() && m.moe.experts % l.ep != 0) return Rule::kExpertsEp;
  const int64_t etp = l.expert_tp();
  if ((etp != l.tp && etp != 1) || (etp != l.tp && (separate || !l.sp))) return Rule::kEtp;
  if (!separate && (l.dp * l.cp * l.tp) % (l.ep * etp) != 0) return Rule::kEpFolded;
  if (m.is_moe() && m.moe.expert_ffn_hidden % etp != 0) return Rule::kExpertFfnTp;
  if (t.seq_len > m.max_seq_len) return Rule::kSeqMax;
  const int64_t seq_div = (l.cp > 1 ? 2 * l.cp : 1) * (l.sp ? l.tp : 1);
  if (t.seq_len % seq_div != 0) return Rule::kSeqDivisible;
  if (l.cp > 1 && l.cp_kind == spec::CpKind::kUlysses && (m.kv_heads / l.tp) % l.cp != 0) {
    return Rule::kUlyssesHeads;
  }
  const int64_t seqs = t.global_batch_seqs();
  if (seqs % (l.data_ranks() * l.mbs) != 0) return Rule::kBatch;
  if (interleaved && spec::MicroBatches(t, l) % l.pp != 0) return Rule::kInterleavedMicrobatches;
  return Rule::kOk;
}

}  // namespace pentamesh::cost
