#include "spec/validate.h"

#include <fmt/format.h>

namespace pentamesh::spec {
namespace {

struct Inputs {
  const ModelSpec& m;
  const ClusterSpec& c;
  const TrainSpec& t;
  const Layout& l;
  bool separate() const { return l.ep_placement == EpPlacement::kSeparate; }
  bool interleaved() const { return l.schedule == Schedule::kInterleaved; }
  int64_t etp() const { return l.expert_tp(); }
  int64_t seq_div() const { return (l.cp > 1 ? 2 * l.cp : 1) * (l.sp ? l.tp : 1); }
};

struct Row {
  Rule rule;
  bool (*broken)(const Inputs&);
  std::string (*message)(const Inputs&);
};

// The table. A row is evaluated only when the degrees row holds; rows of one rule that read as
// "else if" in prose carry the earlier rows' conditions in their predicate.
const Row kRows[] = {
    {Rule::kDegrees,
     [](const Inputs& x) {
       const Layout& l = x.l;
       return l.dp <= 0 || l.tp <= 0 || l.pp <= 0 || l.cp <= 0 || l.ep <= 0 || l.etp < 0 ||
              l.mbs <= 0 || l.virtual_stages <= 0 || l.zero < 0 || l.zero > 3;
     },
     [](const Inputs& x) {
       return fmt::format("layout: degrees, mbs and V must be positive and zero in 0..3 (got {})",
                          ShortLayout(x.l));
     }},
    {Rule::kGpuCount, [](const Inputs& x) { return x.l.gpus() != x.c.gpus(); },
     [](const Inputs& x) {
       return fmt::format("layout: dp*tp*pp*cp{}={} must equal the cluster's {} GPUs",
                          x.separate() ? "*ep" : "", x.l.gpus(), x.c.gpus());
     }},
    {Rule::kTpInNode,
     [](const Inputs& x) { return x.l.tp > x.c.gpus_per_node || x.c.gpus_per_node % x.l.tp != 0; },
     [](const Inputs& x) {
       return fmt::format("layout: tp={} must divide gpus_per_node={} (TP must stay inside a node)",
                          x.l.tp, x.c.gpus_per_node);
     }},
    {Rule::kHeadsTp, [](const Inputs& x) { return x.m.heads % x.l.tp != 0; },
     [](const Inputs& x) {
       return fmt::format("layout: heads={} must be divisible by tp={}", x.m.heads, x.l.tp);
     }},
    {Rule::kKvHeadsTp, [](const Inputs& x) { return x.m.kv_heads % x.l.tp != 0; },
     [](const Inputs& x) {
       return fmt::format("layout: kv_heads={} must be divisible by tp={}", x.m.kv_heads, x.l.tp);
     }},
    {Rule::kFfnTp, [](const Inputs& x) { return x.m.ffn_hidden % x.l.tp != 0; },
     [](const Inputs& x) {
       return fmt::format("layout: ffn_hidden={} must be divisible by tp={}", x.m.ffn_hidden,
                          x.l.tp);
     }},
    {Rule::kLayersPp,
     [](const Inputs& x) { return ChunkLayers(x.m.layers, x.l.pp * x.l.virtual_stages, 0) < 0; },
     [](const Inputs& x) {
       return fmt::format(
           "layout: layers={} must be divisible by pp*virtual_stages={} (pp={}, V={}), or short "
           "of a multiple by 1 or 2 with >= 2 layers per chunk",
           x.m.layers, x.l.pp * x.l.virtual_stages, x.l.pp, x.l.virtual_stages);
     }},
    {Rule::kInterleavedPp, [](const Inputs& x) { return x.interleaved() && x.l.pp < 2; },
     [](const Inputs&) { return std::string("layout: schedule=interleaved needs pp >= 2"); }},
    {Rule::kInterleavedPp,
     [](const Inputs& x) { return !x.interleaved() && x.l.virtual_stages != 1; },
     [](const Inputs&) {
       return std::string("layout: virtual_stages > 1 needs schedule=interleaved:V");
     }},
    {Rule::kInterleavedPp,
     [](const Inputs& x) { return x.interleaved() && x.l.virtual_stages < 2; },
     [](const Inputs&) {
       return std::string("layout: schedule=interleaved needs virtual_stages >= 2");
     }},
    {Rule::kEpDense, [](const Inputs& x) { return !x.m.is_moe() && x.l.ep != 1; },
     [](const Inputs& x) {
       return fmt::format("layout: ep={} needs a MoE model ({} has no experts)", x.l.ep, x.m.name);
     }},
    {Rule::kExpertsEp,
     [](const Inputs& x) { return x.m.is_moe() && x.m.moe.experts % x.l.ep != 0; },
     [](const Inputs& x) {
       return fmt::format("layout: experts={} must be divisible by ep={}", x.m.moe.experts, x.l.ep);
     }},
    {Rule::kEtp, [](const Inputs& x) { return x.etp() != x.l.tp && x.etp() != 1; },
     [](const Inputs& x) {
       return fmt::format("layout: etp={} must be 1 or tp={}", x.etp(), x.l.tp);
     }},
    {Rule::kEtp, [](const Inputs& x) { return x.etp() == 1 && x.l.tp != 1 && x.separate(); },
     [](const Inputs& x) {
       return fmt::format("layout: etp={} (experts not split over tp) needs ep_placement=folded",
                          x.etp());
     }},
    {Rule::kEtp,
     [](const Inputs& x) { return x.etp() == 1 && x.l.tp != 1 && !x.separate() && !x.l.sp; },
     [](const Inputs& x) {
       return fmt::format(
           "layout: etp={} with tp={} needs sp=on (each tp rank dispatches its sequence shard)",
           x.etp(), x.l.tp);
     }},
    {Rule::kEpFolded,
     [](const Inputs& x) {
       const Layout& l = x.l;
       return !x.separate() && (l.dp * l.cp * l.tp) % (l.ep * x.etp()) != 0;
     },
     [](const Inputs& x) {
       const Layout& l = x.l;
       if (x.etp() == l.tp) {
         return fmt::format("layout: ep={} must divide dp*cp={} when ep_placement=folded", l.ep,
                            l.dp * l.cp);
       }
       return fmt::format(
           "layout: ep*etp={} must divide dp*cp*tp={} when ep_placement=folded (ep={}, etp={})",
           l.ep * x.etp(), l.dp * l.cp * l.tp, l.ep, x.etp());
     }},
    {Rule::kExpertFfnTp,
     [](const Inputs& x) { return x.m.is_moe() && x.m.moe.expert_ffn_hidden % x.etp() != 0; },
     [](const Inputs& x) {
       return fmt::format("layout: expert_ffn_hidden={} must be divisible by {}={}",
                          x.m.moe.expert_ffn_hidden, x.etp() == x.l.tp ? "tp" : "etp", x.etp());
     }},
    {Rule::kSeqMax, [](const Inputs& x) { return x.t.seq_len > x.m.max_seq_len; },
     [](const Inputs& x) {
       return fmt::format("train: seq_len={} exceeds the model's max_seq_len={}", x.t.seq_len,
                          x.m.max_seq_len);
     }},
    {Rule::kSeqDivisible, [](const Inputs& x) { return x.t.seq_len % x.seq_div() != 0; },
     [](const Inputs& x) {
       const Layout& l = x.l;
       return fmt::format("layout: seq_len={} must be divisible by {}={} (cp={}, tp={})",
                          x.t.seq_len, l.sp ? (l.cp > 1 ? "2*cp*tp" : "tp") : "2*cp", x.seq_div(),
                          l.cp, l.tp);
     }},
    {Rule::kUlyssesHeads,
     [](const Inputs& x) {
       const Layout& l = x.l;
       return l.cp > 1 && l.cp_kind == CpKind::kUlysses && (x.m.kv_heads / l.tp) % l.cp != 0;
     },
     [](const Inputs& x) {
       return fmt::format(
           "layout: cp_kind=ulysses needs kv_heads/tp={} divisible by cp={} (heads are "
           "scattered)",
           x.m.kv_heads / x.l.tp, x.l.cp);
     }},
    {Rule::kBatch,
     [](const Inputs& x) { return x.t.global_batch_seqs() % (x.l.data_ranks() * x.l.mbs) != 0; },
     [](const Inputs& x) {
       const Layout& l = x.l;
       const bool with_ep = x.separate() && l.ep > 1;
       return fmt::format(
           "layout: global batch of {} sequences must be divisible by {}={} (dp={}, {}mbs={})",
           x.t.global_batch_seqs(), with_ep ? "dp*ep*mbs" : "dp*mbs", l.data_ranks() * l.mbs, l.dp,
           with_ep ? fmt::format("ep={}, ", l.ep) : "", l.mbs);
     }},
    {Rule::kInterleavedMicrobatches,
     [](const Inputs& x) {
       // MicroBatches is 0 when the batch row is broken: this row then holds.
       return x.interleaved() && MicroBatches(x.t, x.l) % x.l.pp != 0;
     },
     [](const Inputs& x) {
       return fmt::format("layout: interleaved schedule needs micro-batches={} divisible by pp={}",
                          MicroBatches(x.t, x.l), x.l.pp);
     }},
};

}  // namespace

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
      return "folded: ep*etp divides dp*cp*tp";
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

int64_t MicroBatches(const TrainSpec& train, const Layout& layout) {
  const int64_t seqs = train.global_batch_seqs();
  const int64_t per_step = layout.data_ranks() * layout.mbs;
  if (per_step <= 0 || seqs <= 0 || seqs % per_step != 0) return 0;
  return seqs / per_step;
}

Rule FirstBrokenRule(const ModelSpec& model, const ClusterSpec& cluster, const TrainSpec& train,
                     const Layout& layout) {
  const Inputs x{model, cluster, train, layout};
  for (const Row& row : kRows) {
    if (row.broken(x)) return row.rule;
  }
  return Rule::kOk;
}

std::vector<Violation> Violations(const ModelSpec& model, const ClusterSpec& cluster,
                                  const TrainSpec& train, const Layout& layout) {
  const Inputs x{model, cluster, train, layout};
  std::vector<Violation> out;
  for (const Row& row : kRows) {
    if (!row.broken(x)) continue;
    out.push_back({row.rule, row.message(x)});
    if (row.rule == Rule::kDegrees) break;  // the other rows divide by the degrees
  }
  return out;
}

std::vector<std::string> Validate(const ModelSpec& model, const ClusterSpec& cluster,
                                  const TrainSpec& train, const Layout& layout) {
  std::vector<std::string> out;
  for (Violation& v : Violations(model, cluster, train, layout))
    out.push_back(std::move(v.message));
  return out;
}

}  // namespace pentamesh::spec
