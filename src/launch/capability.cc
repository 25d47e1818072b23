// The engine capability table: what Megatron-LM, torchtitan and DeepSpeed can run, as rules with
// ids and messages, and the filter that restricts the planner's search to one engine's rules.
#include <fmt/format.h>

#include <algorithm>

#include <map>

#include "launch/launch.h"

namespace pentamesh::launch {
namespace {

using spec::Layout;
using spec::ModelSpec;

// torchtitan builds its EP mesh from dp_shard x cp when ETP = TP (FSDP ranks; DDP has no shard).
bool TorchtitanEpFits(const ModelSpec&, const Layout& l) {
  if (l.ep == 1) return true;
  const int64_t dp_shard = l.zero >= 2 ? EngineDataParallel(l) : 1;
  const int64_t borrow = dp_shard * l.cp * (ExpertTensorParallel(l) == 1 ? l.tp : 1);
  return borrow % l.ep == 0;
}
// torchtitan replicates with DDP only when DDP is the sole parallelism.
bool TorchtitanDdpAlone(const ModelSpec&, const Layout& l) {
  if (l.zero == 0 && l.cp > 1) return false;  // FSDP always shards over cp
  if (l.zero != 0 || EngineDataParallel(l) == 1) return true;
  return l.tp == 1 && l.pp == 1 && l.cp == 1 && l.ep == 1;
}
// torchtitan 0.2.2 (distributed/utils.py maybe_enable_amp) mixes precision through FSDP when it
// shards (dp_shard > 1 or cp > 1), with autocast under DDP or one GPU, and not at all when tp or
// pp > 1 runs without FSDP: those layouts train in fp32.
bool TorchtitanMixedPrecision(const ModelSpec&, const Layout& l) {
  const bool fsdp = (l.zero >= 2 && EngineDataParallel(l) > 1) || l.cp > 1;
  return fsdp || (l.tp == 1 && l.pp == 1);
}
// DeepSpeed-MoE carves expert groups out of the data-parallel group (not the Ulysses group).
bool DeepSpeedEpInDp(const ModelSpec&, const Layout& l) {
  return l.ep == 1 || EngineDataParallel(l) % l.ep == 0;
}
// Megatron-DeepSpeed's MoE layers: experts of the dense FFN's size, every k-th layer, none shared.
// Its k-th layers are the 1-based multiples of k (pentamesh's: 0, k, 2k, ...): the same number
// of MoE layers when k divides the layers.
bool DeepSpeedMoeShape(const ModelSpec& m, const Layout&) {
  return !m.is_moe() || (m.moe.expert_ffn_hidden == m.ffn_hidden && m.moe.first_dense_layers == 0 &&
                         m.moe.shared_experts == 0 && m.layers % m.moe.moe_layer_freq == 0);
}
// DeepSpeed refuses its own MoE layers under ZeRO-3 (engine.py: native MoE with Stage 3).
bool DeepSpeedMoeZero(const ModelSpec& m, const Layout& l) { return !m.is_moe() || l.zero <= 2; }
// DeepSpeed's gate (sharded_moe.py): top-1 keeps the softmax probability of the expert
// (softmax_topk), top-2 and top-k renormalise the k probabilities (topk_renorm); its aux loss is
// over the tokens of the micro-batch on the rank (sequence scope).
bool DeepSpeedMoeRouter(const ModelSpec& m, const Layout&) {
  if (!m.is_moe()) return true;
  const spec::MoeRouter gate =
      m.moe.top_k == 1 ? spec::MoeRouter::kSoftmaxTopK : spec::MoeRouter::kTopKRenorm;
  return m.moe.router == gate && m.moe.aux_loss_scope == spec::AuxLossScope::kSequence;
}
// Megatron-DeepSpeed's --rotary-position-embeddings-theta is an integer flag.
bool IntegerRopeTheta(const ModelSpec& m, const Layout&) {
  return m.rope_theta == static_cast<double>(static_cast<int64_t>(m.rope_theta));
}
// Expert tensor parallelism other than tp (etp = 1, experts whole over the tp ranks).
bool EtpIsTp(const ModelSpec&, const Layout& l) { return l.expert_tp() == l.tp; }
// torchtitan 0.2.2's qwen3 model (the MoE flavour pentamesh writes) builds an MoE block in every
// layer when moe_enabled (TransformerBlock), and its MoE (models/moe: token choice, no capacity)
// never drops a token.
bool TorchtitanMoeEveryLayer(const ModelSpec& m, const Layout&) {
  return !m.is_moe() || (m.moe.first_dense_layers == 0 && m.moe.moe_layer_freq == 1);
}
bool TorchtitanMoeDropless(const ModelSpec& m, const Layout&) {
  return !m.is_moe() || m.moe.capacity_factor == 0;
}
// Megatron asserts sequence parallelism for MoE models with tensor parallelism.
bool MegatronMoeSp(const ModelSpec& m, const Layout& l) { return !m.is_moe() || l.tp == 1 || l.sp; }

// Megatron-Core's TransformerConfig raises for mla_up_proj without multi-latent attention.
bool MlaUpProjNeedsMla(const ModelSpec& m, const Layout& l) {
  return m.is_mla() || !l.recomputes(spec::kRecomputeMlaUpProj);
}

// The attention the emitted configs can express: torchtitan's llama3 flavour and
// Megatron-DeepSpeed's GPT model have grouped-query, full causal attention only.
bool NoMla(const ModelSpec& m, const Layout&) { return !m.is_mla(); }
bool NoWindow(const ModelSpec& m, const Layout&) { return m.sliding_window == 0; }

constexpr EngineSchedule kEngineSchedules[] = {
    {Engine::kMegatron, spec::Schedule::kOneFOneB, "1F1B", nullptr},
    {Engine::kMegatron, spec::Schedule::kInterleaved, "interleaved 1F1B", nullptr},
    {Engine::kMegatron, spec::Schedule::kGPipe, nullptr, "mg-no-gpipe"},
    {Engine::kMegatron, spec::Schedule::kZeroBubble, nullptr, "mg-no-zero-bubble"},
    {Engine::kTorchtitan, spec::Schedule::kOneFOneB, "1F1B", nullptr},
    {Engine::kTorchtitan, spec::Schedule::kGPipe, "GPipe", nullptr},
    {Engine::kTorchtitan, spec::Schedule::kInterleaved, "Interleaved1F1B", nullptr},
    {Engine::kTorchtitan, spec::Schedule::kZeroBubble, nullptr, "tt-no-zb-h1"},
    {Engine::kDeepSpeed, spec::Schedule::kOneFOneB, "1F1B", nullptr},
    {Engine::kDeepSpeed, spec::Schedule::kGPipe, nullptr, "ds-pp-1f1b"},
    {Engine::kDeepSpeed, spec::Schedule::kInterleaved, nullptr, "ds-pp-1f1b"},
    {Engine::kDeepSpeed, spec::Schedule::kZeroBubble, nullptr, "ds-pp-1f1b"},
};

template <Engine kEngine>
bool KnowsSchedule(const ModelSpec&, const Layout& l) {
  return FindEngineSchedule(kEngine, l.schedule) != nullptr;
}

constexpr CapabilityRule kRules[] = {
    {"mg-no-gpipe", Engine::kMegatron, "pp>=2", "schedule!=gpipe", nullptr,
     "Megatron-LM has no GPipe schedule (its pipeline schedules are 1F1B and interleaved 1F1B)"},
    {"mg-no-zero-bubble", Engine::kMegatron, "pp>=2", "schedule!=zb", nullptr,
     "Megatron-LM has no zero-bubble schedule (its pipeline schedules are 1F1B and interleaved "
     "1F1B)"},
    {"mg-unknown-schedule", Engine::kMegatron, "pp>=2", "", KnowsSchedule<Engine::kMegatron>,
     "pentamesh does not know Megatron-LM's counterpart of this schedule (launch/capability.cc "
     "kEngineSchedules has no row for it)"},
    {"mg-moe-needs-sp", Engine::kMegatron, "", "", MegatronMoeSp,
     "Megatron-LM requires --sequence-parallel for MoE models with tensor parallelism (sp=on)"},
    {"mg-mla-up-proj-needs-mla", Engine::kMegatron, "", "", MlaUpProjNeedsMla,
     "Megatron-Core recomputes mla_up_proj only with multi-latent attention (model.mla): "
     "TransformerConfig raises otherwise"},
    {"tt-no-recompute-modules", Engine::kTorchtitan, "", "recompute_modules=core_attn", nullptr,
     "torchtitan's selective activation checkpointing is per-op or per-layer; it has no module "
     "list (recompute_modules)"},
    {"ds-no-recompute-modules", Engine::kDeepSpeed, "", "recompute_modules=core_attn", nullptr,
     "Megatron-DeepSpeed's selective recomputation reruns core attention only; it has no module "
     "list (recompute_modules)"},
    {"tt-no-ulysses", Engine::kTorchtitan, "cp>=2", "cp_kind=ring", nullptr,
     "torchtitan's context parallelism is ring attention only (no Ulysses all-to-all)"},
    {"tt-no-zero1", Engine::kTorchtitan, "", "zero!=1", nullptr,
     "torchtitan shards with FSDP2 (ZeRO-3, or ZeRO-2 with reshard_after_forward=never) or "
     "replicates with DDP (ZeRO-0); it has no ZeRO-1"},
    {"tt-tp-is-sp", Engine::kTorchtitan, "tp>=2", "sp=on", nullptr,
     "torchtitan's tensor parallelism always shards norms and dropout over the sequence (sp=on)"},
    {"tt-no-zb-h1", Engine::kTorchtitan, "pp>=2", "schedule!=zb", nullptr,
     "torchtitan's zero-bubble schedules (ZBVZeroBubble, InterleavedZeroBubble) run two or more "
     "stages per rank; pentamesh's zb is ZB-H1 with one"},
    {"tt-unknown-schedule", Engine::kTorchtitan, "pp>=2", "", KnowsSchedule<Engine::kTorchtitan>,
     "pentamesh does not know torchtitan's counterpart of this schedule (launch/capability.cc "
     "kEngineSchedules has no row for it)"},
    {"tt-ddp-alone", Engine::kTorchtitan, "", "", TorchtitanDdpAlone,
     "torchtitan's DDP (zero=0 with dp > 1) does not combine with tp, pp, cp or ep, and with cp > "
     "1 "
     "torchtitan always shards over cp with FSDP: use zero=2|3"},
    {"tt-bf16-needs-fsdp", Engine::kTorchtitan, "", "", TorchtitanMixedPrecision,
     "torchtitan 0.2.2 mixes precision through FSDP: with tp or pp > 1, no data sharding "
     "(data_parallel_shard_degree 1) and cp = 1 it trains in fp32 (maybe_enable_amp), not in the "
     "bf16 pentamesh costs: shard the data (zero=2|3 with dp > 1) or use cp > 1"},
    {"tt-etp-is-tp", Engine::kTorchtitan, "", "", EtpIsTp,
     "pentamesh emits torchtitan's expert parallelism with expert TP = TP only (etp=1 is not "
     "written for torchtitan yet)"},
    {"tt-ep-divides-shard", Engine::kTorchtitan, "", "", TorchtitanEpFits,
     "torchtitan borrows EP ranks from dp_shard x cp (x tp when ETP = 1): ep must divide them"},
    {"tt-moe-every-layer", Engine::kTorchtitan, "", "", TorchtitanMoeEveryLayer,
     "torchtitan 0.2.2's qwen3 MoE model puts an MoE block in every layer (moe_enabled): leading "
     "dense layers (model.moe.first_dense_layers) or an MoE layer every k > 1 layers "
     "(model.moe.moe_layer_freq) cannot be registered as its flavour"},
    {"tt-moe-dropless", Engine::kTorchtitan, "", "", TorchtitanMoeDropless,
     "torchtitan 0.2.2's MoE is dropless token choice (MoEArgs has no capacity factor): "
     "model.moe.capacity_factor must be 0"},
    {"tt-no-mla", Engine::kTorchtitan, "", "", NoMla,
     "pentamesh writes torchtitan's llama3 model, which has no multi-head latent attention "
     "(model.mla)"},
    {"tt-no-window", Engine::kTorchtitan, "", "", NoWindow,
     "pentamesh writes torchtitan's llama3 model, which has no sliding-window attention "
     "(model.sliding_window)"},
    {"ds-no-mla", Engine::kDeepSpeed, "", "", NoMla,
     "Megatron-DeepSpeed's GPT model has no multi-head latent attention (model.mla)"},
    {"ds-no-window", Engine::kDeepSpeed, "", "", NoWindow,
     "Megatron-DeepSpeed's GPT model has no sliding-window attention (model.sliding_window)"},
    {"ds-pp-zero01", Engine::kDeepSpeed, "pp>=2", "zero<=1", nullptr,
     "DeepSpeed's pipeline engine runs with ZeRO stage 0 or 1 only"},
    {"ds-pp-1f1b", Engine::kDeepSpeed, "pp>=2", "schedule=1f1b", nullptr,
     "DeepSpeed's pipeline engine has one schedule, 1F1B (no GPipe, interleaved or zero-bubble)"},
    {"ds-unknown-schedule", Engine::kDeepSpeed, "pp>=2", "", KnowsSchedule<Engine::kDeepSpeed>,
     "pentamesh does not know DeepSpeed's counterpart of this schedule (launch/capability.cc "
     "kEngineSchedules has no row for it)"},
    {"ds-no-ring", Engine::kDeepSpeed, "cp>=2", "cp_kind=ulysses", nullptr,
     "DeepSpeed's sequence parallelism is Ulysses (all-to-all); it has no ring attention"},
    {"ds-autotp-zero012", Engine::kDeepSpeed, "tp>=2", "zero<=2", nullptr,
     "DeepSpeed's AutoTP training runs with ZeRO stages 0 to 2, not 3"},
    {"ds-ulysses-no-megatron-sp", Engine::kDeepSpeed, "cp>=2 tp>=2", "sp=off", nullptr,
     "Megatron-DeepSpeed cannot combine Ulysses (--ds-sequence-parallel-size) with Megatron's "
     "--sequence-parallel"},
    {"ds-moe-shape", Engine::kDeepSpeed, "", "", DeepSpeedMoeShape,
     "Megatron-DeepSpeed's MoE experts have the dense FFN's size, in every k-th layer "
     "(--expert-interval, k dividing the layers), with no leading dense layers and no shared "
     "experts"},
    {"ds-moe-no-zero3", Engine::kDeepSpeed, "", "", DeepSpeedMoeZero,
     "DeepSpeed refuses its MoE layers with ZeRO stage 3 (\"Native DeepSpeed MoE is not supported "
     "with ZeRO Stage 3\"): zero must be 0, 1 or 2 for an MoE model"},
    {"ds-moe-router", Engine::kDeepSpeed, "", "", DeepSpeedMoeRouter,
     "DeepSpeed's MoE gate keeps the softmax probability for top-1 (router softmax_topk) and "
     "renormalises the k probabilities for top-k >= 2 (router topk_renorm), with the aux loss "
     "over the rank's micro-batch (aux_loss_scope sequence): the model's router differs"},
    {"ds-rope-theta-int", Engine::kDeepSpeed, "", "", IntegerRopeTheta,
     "Megatron-DeepSpeed's --rotary-position-embeddings-theta takes an integer: the model's "
     "rope_theta is not one"},
    {"ds-ep-in-dp", Engine::kDeepSpeed, "", "", DeepSpeedEpInDp,
     "DeepSpeed-MoE builds expert groups from the data-parallel ranks: ep must divide them"},
};

// Every clause of `text` holds for the layout (an empty text holds). The rules' clauses are
// parsed once (the planner asks for every branch of the space).
bool AllHold(const char* text, const Layout& l) {
  if (text == nullptr || *text == '\0') return true;
  static const std::map<const char*, plan::Constraints> parsed = [] {
    std::map<const char*, plan::Constraints> m;
    for (const CapabilityRule& r : kRules) {
      for (const char* t : {r.when, r.require}) {
        auto c = plan::Constraints::Parse(t);
        if (c.ok()) m.emplace(t, std::move(*c));
      }
    }
    return m;
  }();
  const auto it = parsed.find(text);
  return it != parsed.end() && it->second.AllowsLayout(l);
}

}  // namespace

const char* ToString(Engine engine) {
  switch (engine) {
    case Engine::kMegatron:
      return "megatron";
    case Engine::kTorchtitan:
      return "torchtitan";
    case Engine::kDeepSpeed:
      return "deepspeed";
  }
  return "?";
}

core::Result<Engine> ParseEngine(const std::string& option, const std::string& name) {
  for (Engine e : kEngines) {
    if (name == ToString(e)) return e;
  }
  return core::Status::Error(fmt::format(
      "{}: '{}' is not a known engine (known: megatron, torchtitan, deepspeed)", option, name));
}

std::span<const CapabilityRule> CapabilityTable() { return kRules; }

std::span<const EngineSchedule> EngineSchedules() { return kEngineSchedules; }

const EngineSchedule* FindEngineSchedule(Engine engine, spec::Schedule schedule) {
  for (const EngineSchedule& row : kEngineSchedules) {
    if (row.engine == engine && row.schedule == schedule) return &row;
  }
  return nullptr;
}

std::vector<const CapabilityRule*> Violations(Engine engine, const ModelSpec& model,
                                              const Layout& layout) {
  std::vector<const CapabilityRule*> out;
  for (const CapabilityRule& r : kRules) {
    if (r.engine != engine) continue;
    bool ok = !AllHold(r.when, layout) || AllHold(r.require, layout);
    if (ok && r.check != nullptr && AllHold(r.when, layout)) ok = r.check(model, layout);
    if (!ok) out.push_back(&r);
  }
  return out;
}

std::vector<const CapabilityRule*> ImportViolations(const Imported& im) {
  std::vector<const CapabilityRule*> out;
  for (const CapabilityRule* r : Violations(im.engine, im.model, im.layout)) {
    if (std::find(im.waived_rules.begin(), im.waived_rules.end(), r->id) == im.waived_rules.end()) {
      out.push_back(r);
    }
  }
  return out;
}

std::string DescribeViolations(Engine engine, const std::vector<const CapabilityRule*>& rules) {
  std::string out;
  for (const CapabilityRule* r : rules) {
    if (!out.empty()) out += "\n";
    out +=
        fmt::format("{} cannot run this layout: rule {}: {}", ToString(engine), r->id, r->message);
  }
  return out;
}

void RestrictToEngine(Engine engine, const ModelSpec& model, plan::Constraints& allow) {
  // A rule without a `when` holds for every layout the engine runs: its clause also restricts
  // the fields the filter cannot (the space's micro-batch and recomputation choices).
  for (const CapabilityRule& r : kRules) {
    if (r.engine != engine || (r.when != nullptr && *r.when != '\0') || r.require == nullptr ||
        *r.require == '\0') {
      continue;
    }
    if (auto c = plan::Constraints::Parse(r.require); c.ok()) allow.AddClauses(*c);
  }
  allow.AddFilter(fmt::format("engine={}", ToString(engine)), [engine, model](const Layout& l) {
    return Violations(engine, model, l).empty();
  });
}

const char* StackProfile(Engine engine) {
  // The --stack calibration profiles are named after the engines whose measured runs fit them.
  return ToString(engine);
}

StackChoice ChooseStack(const std::string& given, Engine engine) {
  if (given.empty()) {
    return {StackProfile(engine),
            fmt::format("{}'s own profile (no --stack given)", ToString(engine))};
  }
  return {given, fmt::format("--stack {}", given)};
}

int64_t ExpertTensorParallel(const Layout& layout) { return layout.expert_tp(); }

int64_t EngineDataParallel(const Layout& layout) { return layout.data_ranks(); }

Layout CanonicalForEngines(const Layout& layout) {
  Layout l = layout;
  if (l.ep_placement == spec::EpPlacement::kSeparate && l.ep > 1) {
    l.dp *= l.ep;
    l.ep_placement = spec::EpPlacement::kFolded;
  }
  if (l.ep == 1) l.ep_placement = spec::EpPlacement::kSeparate;
  if (l.tp == 1) l.sp = true;
  if (l.cp == 1) l.cp_kind = spec::CpKind::kRing;
  if (l.pp == 1) {
    l.schedule = spec::Schedule::kOneFOneB;
    l.virtual_stages = 1;
  }
  return l;
}

}  // namespace pentamesh::launch
