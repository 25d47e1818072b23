// Pipeline-parallel actions and programs: a schedule is data, one Program (a list of Actions) per
// pp rank, produced by the pure generators in generate.h and checked by simulate.h.
//
// Design: a Program lists compute actions only (F, B, W). Point-to-point transfers are not stored;
// they are derived from the data dependencies (ExpandComm in simulate.h): before F of virtual stage
// s > 0 the rank receives the activation from stage s-1, after it sends to stage s+1; B mirrors
// that in the other direction. One source of truth (the compute order) means a generator cannot
// forget or misplace a send, and the executor and the simulator derive the same transfers.
//
// Virtual stages: model chunk c of pp rank r holds virtual stage s = c * pp + r (Megatron's
// interleaved placement), so there are S = pp * V stages and stage s lives on rank s % pp; ZB-V
// uses the V-shaped placement instead (see Topology).
//
// Invariant: an Action names (kind, chunk, microbatch); the rank is the Program's index.
// B is the full backward (input and weight gradients) unless the same rank's program also holds a
// W for the same (chunk, microbatch); then B is the input-gradient half and W the weight half
// (zero-bubble split, Qi et al. 2023).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pentamesh::schedule {

enum class ActionKind : uint8_t {
  kForward,   // "F": forward of one micro-batch through one model chunk
  kBackward,  // "B": backward (full, or input-gradient only when a W follows)
  kWeight,    // "W": weight-gradient half of a split backward
};

struct Action {
  ActionKind kind = ActionKind::kForward;
  int chunk = 0;       // model chunk on this rank, 0 <= chunk < V
  int microbatch = 0;  // 0 <= microbatch < m
  bool operator==(const Action&) const = default;
};

using Program = std::vector<Action>;

inline Action F(int microbatch, int chunk = 0) { return {ActionKind::kForward, chunk, microbatch}; }
inline Action B(int microbatch, int chunk = 0) {
  return {ActionKind::kBackward, chunk, microbatch};
}
inline Action W(int microbatch, int chunk = 0) { return {ActionKind::kWeight, chunk, microbatch}; }

char KindLetter(ActionKind kind);
// "F3", or "F3.1" (micro-batch 3, chunk 1) when show_chunk (interleaved schedules).
std::string ToString(const Action& action, bool show_chunk = false);

// Where virtual stages live. kLoop (Megatron's interleaved placement, and V = 1): chunk c of rank
// r is stage c * pp + r. kVShape (ZB-V, V = 2): chunk 0 of rank r is stage r and chunk 1 is stage
// 2 * pp - 1 - r, so rank 0 holds the first and the last stage and the turn at stage pp-1 -> pp
// stays on rank pp-1.
enum class Placement : uint8_t { kLoop, kVShape };

struct Topology {
  int pp = 1;              // pipeline ranks
  int virtual_stages = 1;  // model chunks per rank (V)
  int microbatches = 1;    // m
  Placement placement = Placement::kLoop;

  int stages() const { return pp * virtual_stages; }
  int Stage(int rank, int chunk) const {
    if (placement == Placement::kVShape && chunk == 1) return 2 * pp - 1 - rank;
    return chunk * pp + rank;
  }
  int RankOf(int stage) const {
    if (placement == Placement::kVShape && stage >= pp) return 2 * pp - 1 - stage;
    return stage % pp;
  }
  int ChunkOf(int stage) const { return stage / pp; }
};

}  // namespace pentamesh::schedule
