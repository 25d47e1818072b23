// What the CPU engine can run, as rule rows: a run's layout must first satisfy the planner's
// rules (spec/validate.h's table, the one place for layout rules), checked on the host as a
// cluster of one node; the engine then adds only its own limits, each a row of kEngineRows in
// engine_rules.cc (id, predicate saying the row is broken, message naming the field).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "train/run_config.h"

namespace pentamesh::train {

enum class EngineRule {
  kTiedPipeline,  // pp > 1 with tied embeddings
  kSchedule,      // the executor has no program for the layout's schedule and micro-batches
  kVocabTp,       // vocab % tp (the vocab-parallel embedding and head)
};
// One line per rule: what the engine does not run.
const char* EngineRuleName(EngineRule rule);

// Every broken row's message: the planner's rules first ("run.layout: ..."), then the engine's.
std::vector<std::string> EngineLayoutViolations(const RunConfig& config);
// Ok, or one error with every message on its own line.
core::Status CheckEngineLayout(const RunConfig& config);

}  // namespace pentamesh::train
