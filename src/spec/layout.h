// Layout: how one training job is laid out over the GPUs: the five degrees, ZeRO stage,
// micro-batch, recomputation and pipeline schedule. Parsed from "dp=8 tp=8 pp=4 ..." strings.
//
// Two expert placements:
//   kSeparate: EP is its own mesh axis: dp * tp * pp * cp * ep = GPUs (the seeds' formula). The ep
//              ranks read different sequences (they are data-parallel for the non-expert weights),
//              so a step's sequences are split over dp * ep ranks.
//   kFolded:   EP reuses the ranks of a pipeline stage for MoE layers (Megatron-Core's "MoE
//              parallel folding"): dp * tp * pp * cp = GPUs, and the stage's tp x cp x dp ranks
//              are re-split as ep x etp x expert-dp. With etp = tp (the default) the experts are
//              split over tp like the dense FFN and ep divides dp * cp; with etp = 1 each expert
//              is whole and ep may span the tp ranks too (ep divides dp * cp * tp: Qwen3-235B at
//              tp 2, ep 32; DeepSeek-V3 at tp 2, ep 64). Experts are replicated over
//              dp * cp * tp / (ep * etp) ranks (expert-dp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace pentamesh::spec {

enum class Recompute { kNone, kSelective, kFull };
// Modules selective recomputation reruns (Megatron-Core's --recompute-modules), a bit each.
// core_attn: the attention core; layernorm: the norms whose output is not fused into the next
// GEMM (with Transformer Engine, the MoE block's pre-FFN norm); moe_act: the routed experts'
// activation function; mla_up_proj: MLA's query and key/value up-projections; mlp: the dense
// layers' whole FFN.
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1u << 0,
  kRecomputeLayerNorm = 1u << 1,
  kRecomputeMoeAct = 1u << 2,
  kRecomputeMlaUpProj = 1u << 3,
  kRecomputeMlp = 1u << 4,
};
// Whether recomputation r with module list `modules` reruns module m: selective with m in its
// list, or core attention alone when the list is empty (Megatron's default). Full reruns every
// module, but through the layer input, costed on its own.
constexpr bool Recomputes(Recompute r, uint32_t modules, RecomputeModule m) {
  if (r != Recompute::kSelective) return false;
  return ((modules != 0 ? modules : kRecomputeCoreAttn) & m) != 0;
}
enum class Schedule { kGPipe, kOneFOneB, kInterleaved, kZeroBubble };
enum class CpKind { kRing, kUlysses };
enum class EpPlacement { kSeparate, kFolded };

struct Layout {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t cp = 1;
  int64_t ep = 1;
  int64_t etp = 0;  // expert tensor parallel degree: 0 = tp; 1 (folded only): experts whole
  int zero = 0;     // ZeRO stage 0..3 over the data-parallel ranks
  int64_t mbs = 1;  // sequences per micro-batch
  Recompute recompute = Recompute::kNone;
  // With recompute = selective: the RecomputeModule bits it reruns; 0 = core_attn alone
  // (Megatron's default list).
  uint32_t recompute_modules = 0;
  Schedule schedule = Schedule::kOneFOneB;
  int64_t virtual_stages = 1;  // model chunks per pp rank; > 1 only for kInterleaved
  CpKind cp_kind = CpKind::kRing;
  EpPlacement ep_placement = EpPlacement::kSeparate;
  bool sp = true;  // Megatron sequence parallel inside the TP group

  // GPUs the layout occupies.
  int64_t gpus() const {
    return dp * tp * pp * cp * (ep_placement == EpPlacement::kSeparate ? ep : 1);
  }
  // Ranks that read different sequences: dp, times ep when EP is its own axis.
  int64_t data_ranks() const { return dp * (ep_placement == EpPlacement::kSeparate ? ep : 1); }
  // The expert tensor-parallel degree in effect (etp, or tp when etp = 0).
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  bool recomputes(RecomputeModule m) const { return Recomputes(recompute, recompute_modules, m); }
  bool operator==(const Layout&) const = default;
};

// Pipeline split of `layers` into `chunks` = pp * virtual_stages model chunks (chunk j = v * pp + r
// lives on pp rank r as its v-th model chunk, Megatron's interleaved assignment). Every chunk holds
// n = ceil(layers / chunks) layers, except when layers = chunks * n - d with d = 1 or 2: then the
// last chunk (d >= 1) and the first chunk (d = 2) hold n - 1, so the stages that also carry the LM
// head and the embedding carry one layer fewer (the Llama 3 405B split: 126 layers on 16 stages).
// Returns -1 when the split is not allowed (d > 2, or a chunk would be empty).
// Example: ChunkLayers(126, 16, 0) = 7, ChunkLayers(126, 16, 1) = 8, ChunkLayers(126, 16, 15) = 7.
int64_t ChunkLayers(int64_t layers, int64_t chunks, int64_t chunk);
// Index of the first layer of `chunk`. REQUIRES: ChunkLayers(layers, chunks, 0) >= 0.
int64_t ChunkFirstLayer(int64_t layers, int64_t chunks, int64_t chunk);

// Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm) can run on this
// layout: experts over ep > 1 ranks, no full recomputation, and virtual stages when pipelined
// (TransformerConfig.__post_init__, core_v0.16.1). The cost model hides CostParams::ep_overlap of
// the all-to-alls only here, and --emit megatron writes the flag only here.
bool EpOverlapRuns(const Layout& l);

// Parses "dp=8 tp=8 pp=4 cp=2 ep=8 zero=1 mbs=1 recompute=selective schedule=interleaved:2
// cp_kind=ring ep_placement=folded sp=on"; recompute_modules=moe_act+layernorm (with
// recompute=selective) names the modules, '+'-joined. Keys may come in any order; omitted keys keep
// their defaults; the keys and words are those of LayoutFields() (virtual_stages, alias v, is also
// written schedule=interleaved:V). Errors name the key and the reason.
core::Result<Layout> ParseLayout(const std::string& text);
// The inverse of ParseLayout: every key, in canonical order.
std::string FormatLayout(const Layout& layout);
// Short form for tables: "dp8 tp8 pp4 cp2 ep8 z1 mbs1 sel 1f1b".
std::string ShortLayout(const Layout& layout);

const char* ToString(Recompute r);
// "core_attn+moe_act": the modules of a RecomputeModule mask, in bit order ("" for 0).
std::string RecomputeModulesText(uint32_t modules);
// The inverse; the error names the word and lists the known ones.
core::Result<uint32_t> ParseRecomputeModules(const std::string& text);
const char* ToString(Schedule s);
const char* ToString(CpKind k);
const char* ToString(EpPlacement p);

// The layout's fields, one entry per member of Layout (layout.cc breaks the build when a member
// is added without one). `--layout` (ParseLayout), `--allow` (plan::Constraints), FormatLayout and
// the JSON writer all read this table, so they accept and print the same keys and words.
enum class LayoutField : uint8_t {
  kDp,
  kTp,
  kPp,
  kCp,
  kEp,
  kEtp,  // compared and printed as the expert TP degree in effect (tp, or etp)
  kZero,
  kMbs,
  kRecompute,
  kRecomputeModules,  // a set: parsed and printed as '+'-joined words (RecomputeModulesText)
  kSchedule,
  kVirtualStages,
  kCpKind,
  kEpPlacement,
  kSp,
  kCount
};
// A word an enumerated field accepts and the integer it stands for (the enum's value; sp: 1/0).
// The first word of each value is the one printed; the others are aliases.
struct FieldWord {
  const char* word;
  int64_t value;
};
struct LayoutFieldInfo {
  LayoutField field;
  const char* key;                   // as in --layout, --allow and the JSON layout
  const char* alias;                 // another key both parsers accept (nullptr: none)
  std::span<const FieldWord> words;  // empty: an integer field
};
std::span<const LayoutFieldInfo> LayoutFields();
const LayoutFieldInfo& FieldInfo(LayoutField field);
// The field's value as an integer: degrees and counts as they are (etp: expert_tp()), enums
// their underlying value, sp 1 or 0.
int64_t FieldValue(const Layout& layout, LayoutField field);
// An enumerated field's word ("zero-bubble", "true") as its value; the error lists the words.
core::Result<int64_t> ParseFieldWord(LayoutField field, const std::string& word);
// The printed word of an enumerated field's value.
const char* FieldWordFor(LayoutField field, int64_t value);

}  // namespace pentamesh::spec
