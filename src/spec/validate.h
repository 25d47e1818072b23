// The structural rules a layout must satisfy for a model, cluster and batch (memory capacity is
// cost/'s), written once as a table (kRows in validate.cc): each row is a rule id, a
// predicate saying the row is broken, and the message naming the field, the values and the rule.
// Validate (every broken row's message), FirstBrokenRule (the first broken rule, never allocates:
// cost::CheckLayout, the planner's hot path) and the planner's explanations (by rule id) all walk
// it. Rows that share an id are the variants of one rule (an interleaved schedule's three
// conditions, the expert-TP cases). Degrees, mbs and V must be positive and zero in 0..3 before
// any other row is evaluated (the rest divide by them).
#pragma once

#include <string>
#include <vector>

#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::spec {

enum class Rule {
  kOk = 0,
  kGpuCount,                 // product of degrees != GPUs
  kTpInNode,                 // tp must divide gpus_per_node
  kHeadsTp,                  // heads % tp
  kKvHeadsTp,                // kv_heads % tp
  kFfnTp,                    // ffn_hidden % tp
  kLayersPp,                 // layers split over pp * V (spec::ChunkLayers)
  kInterleavedPp,            // interleaved needs pp >= 2 and V >= 2
  kEpDense,                  // ep > 1 on a dense model
  kExpertsEp,                // experts % ep
  kEtp,                      // etp is tp, or 1 (folded, sp on)
  kEpFolded,                 // folded: ep * etp must divide dp * cp * tp
  kExpertFfnTp,              // expert_ffn_hidden % etp
  kSeqMax,                   // seq_len > max_seq_len
  kSeqDivisible,             // seq_len % (2 cp)(tp if sp)
  kUlyssesHeads,             // ulysses: (kv_heads / tp) % cp
  kBatch,                    // sequences % (data ranks * mbs)
  kInterleavedMicrobatches,  // interleaved: micro-batches % pp
  kDegrees,                  // a degree, mbs or V <= 0, or zero outside 0..3
};
// One line per rule: what it requires.
const char* RuleName(Rule rule);

struct Violation {
  Rule rule;
  std::string message;
};

// Micro-batches per optimizer step on one pipeline: global sequences / (dp * mbs).
// Returns 0 when the batch is not divisible (Validate reports why).
int64_t MicroBatches(const TrainSpec& train, const Layout& layout);

// The first broken rule in table order (Rule::kOk when none). Never allocates.
Rule FirstBrokenRule(const ModelSpec& model, const ClusterSpec& cluster, const TrainSpec& train,
                     const Layout& layout);
// Every broken row, in table order, with its rule.
std::vector<Violation> Violations(const ModelSpec& model, const ClusterSpec& cluster,
                                  const TrainSpec& train, const Layout& layout);
// Every broken row's message. Empty exactly when FirstBrokenRule(...) == Rule::kOk.
std::vector<std::string> Validate(const ModelSpec& model, const ClusterSpec& cluster,
                                  const TrainSpec& train, const Layout& layout);

}  // namespace pentamesh::spec
