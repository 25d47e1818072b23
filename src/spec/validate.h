// Structural rules a layout must satisfy for a model, cluster and batch. Every violated rule is
// returned, each naming the field, the values and the rule (memory capacity is checked by cost/).
#pragma once

#include <string>
#include <vector>

#include "spec/cluster_spec.h"
#include "spec/layout.h"
#include "spec/model_spec.h"
#include "spec/train_spec.h"

namespace pentamesh::spec {

// Micro-batches per optimizer step on one pipeline: global sequences / (dp * mbs).
// Returns 0 when the batch is not divisible (Validate reports why).
int64_t MicroBatches(const TrainSpec& train, const Layout& layout);

std::vector<std::string> Validate(const ModelSpec& model, const ClusterSpec& cluster,
                                  const TrainSpec& train, const Layout& layout);

}  // namespace pentamesh::spec
