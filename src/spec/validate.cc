#include "spec/validate.h"

#include <fmt/format.h>

namespace pentamesh::spec {

int64_t MicroBatches(const TrainSpec& train, const Layout& layout) {
  const int64_t seqs = train.global_batch_seqs();
  const int64_t per_step = layout.data_ranks() * layout.mbs;
  if (per_step <= 0 || seqs <= 0 || seqs % per_step != 0) return 0;
  return seqs / per_step;
}

std::vector<std::string> Validate(const ModelSpec& model, const ClusterSpec& cluster,
                                  const TrainSpec& train, const Layout& l) {
  std::vector<std::string> v;
  const bool separate = l.ep_placement == EpPlacement::kSeparate;
  if (l.gpus() != cluster.gpus()) {
    v.push_back(fmt::format("layout: dp*tp*pp*cp{}={} must equal the cluster's {} GPUs",
                            separate ? "*ep" : "", l.gpus(), cluster.gpus()));
  }
  if (l.tp > cluster.gpus_per_node || cluster.gpus_per_node % l.tp != 0) {
    v.push_back(
        fmt::format("layout: tp={} must divide gpus_per_node={} (TP must stay inside a node)", l.tp,
                    cluster.gpus_per_node));
  }
  if (model.heads % l.tp != 0) {
    v.push_back(fmt::format("layout: heads={} must be divisible by tp={}", model.heads, l.tp));
  }
  if (model.kv_heads % l.tp != 0) {
    v.push_back(
        fmt::format("layout: kv_heads={} must be divisible by tp={}", model.kv_heads, l.tp));
  }
  if (model.ffn_hidden % l.tp != 0) {
    v.push_back(
        fmt::format("layout: ffn_hidden={} must be divisible by tp={}", model.ffn_hidden, l.tp));
  }
  const int64_t chunks = l.pp * l.virtual_stages;
  if (ChunkLayers(model.layers, chunks, 0) < 0) {
    v.push_back(
        fmt::format("layout: layers={} must be divisible by pp*virtual_stages={} (pp={}, "
                    "V={}), or short of a multiple by 1 or 2 with >= 2 layers per chunk",
                    model.layers, chunks, l.pp, l.virtual_stages));
  }
  if (l.schedule == Schedule::kInterleaved && l.pp < 2) {
    v.push_back("layout: schedule=interleaved needs pp >= 2");
  }
  if (l.schedule != Schedule::kInterleaved && l.virtual_stages != 1) {
    v.push_back("layout: virtual_stages > 1 needs schedule=interleaved:V");
  }
  if (l.schedule == Schedule::kInterleaved && l.virtual_stages < 2) {
    v.push_back("layout: schedule=interleaved needs virtual_stages >= 2");
  }
  if (!model.is_moe() && l.ep != 1) {
    v.push_back(
        fmt::format("layout: ep={} needs a MoE model ({} has no experts)", l.ep, model.name));
  }
  if (model.is_moe() && model.moe.experts % l.ep != 0) {
    v.push_back(
        fmt::format("layout: experts={} must be divisible by ep={}", model.moe.experts, l.ep));
  }
  const int64_t etp = l.expert_tp();
  if (etp != l.tp && etp != 1) {
    v.push_back(fmt::format("layout: etp={} must be 1 or tp={}", etp, l.tp));
  } else if (etp != l.tp && separate) {
    v.push_back(
        fmt::format("layout: etp={} (experts not split over tp) needs ep_placement=folded", etp));
  } else if (etp != l.tp && !l.sp) {
    v.push_back(fmt::format(
        "layout: etp={} with tp={} needs sp=on (each tp rank dispatches its sequence shard)", etp,
        l.tp));
  }
  if (!separate && etp == l.tp && (l.dp * l.cp) % l.ep != 0) {
    v.push_back(fmt::format("layout: ep={} must divide dp*cp={} when ep_placement=folded", l.ep,
                            l.dp * l.cp));
  } else if (!separate && etp != l.tp && (l.dp * l.cp * l.tp) % (l.ep * etp) != 0) {
    v.push_back(fmt::format(
        "layout: ep*etp={} must divide dp*cp*tp={} when ep_placement=folded (ep={}, etp={})",
        l.ep * etp, l.dp * l.cp * l.tp, l.ep, etp));
  }
  if (model.is_moe() && etp > 0 && model.moe.expert_ffn_hidden % etp != 0) {
    v.push_back(fmt::format("layout: expert_ffn_hidden={} must be divisible by {}={}",
                            model.moe.expert_ffn_hidden, etp == l.tp ? "tp" : "etp", etp));
  }
  if (train.seq_len > model.max_seq_len) {
    v.push_back(fmt::format("train: seq_len={} exceeds the model's max_seq_len={}", train.seq_len,
                            model.max_seq_len));
  }
  const int64_t seq_div = (l.cp > 1 ? 2 * l.cp : 1) * (l.sp ? l.tp : 1);
  if (train.seq_len % seq_div != 0) {
    v.push_back(fmt::format("layout: seq_len={} must be divisible by {}={} (cp={}, tp={})",
                            train.seq_len, l.sp ? (l.cp > 1 ? "2*cp*tp" : "tp") : "2*cp", seq_div,
                            l.cp, l.tp));
  }
  if (l.cp > 1 && l.cp_kind == CpKind::kUlysses && (model.kv_heads / l.tp) % l.cp != 0) {
    v.push_back(fmt::format(
        "layout: cp_kind=ulysses needs kv_heads/tp={} divisible by cp={} (heads are scattered)",
        model.kv_heads / l.tp, l.cp));
  }
  const int64_t seqs = train.global_batch_seqs();
  if (seqs % (l.data_ranks() * l.mbs) != 0) {
    const bool with_ep = separate && l.ep > 1;
    v.push_back(fmt::format(
        "layout: global batch of {} sequences must be divisible by {}={} (dp={}, {}mbs={})", seqs,
        with_ep ? "dp*ep*mbs" : "dp*mbs", l.data_ranks() * l.mbs, l.dp,
        with_ep ? fmt::format("ep={}, ", l.ep) : "", l.mbs));
  } else if (l.schedule == Schedule::kInterleaved && MicroBatches(train, l) % l.pp != 0) {
    v.push_back(
        fmt::format("layout: interleaved schedule needs micro-batches={} divisible by pp={}",
                    MicroBatches(train, l), l.pp));
  }
  return v;
}

}  // namespace pentamesh::spec
