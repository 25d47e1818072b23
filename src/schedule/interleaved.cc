// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's forward_backward_pipelining_with_
// interleaving): each rank holds V model chunks (chunk c of rank r = virtual stage c*pp + r).
// Forwards go through the chunks in groups of pp micro-batches: k-th forward is micro-batch
// (k / (pp*V)) * pp + k % pp of chunk (k % (pp*V)) / pp; backwards visit chunks in reverse.
// Warmup = 2*(pp - r - 1) + (V - 1)*pp forwards (capped at m*V), then 1F1B, then cooldown.
// Invariant: m % pp == 0 (each group holds pp micro-batches).
#include <algorithm>

#include "core/check.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

Action InterleavedForward(int pp, int virtual_stages, int k) {
  const int group = pp * virtual_stages;
  const int in_group = k % group;
  return F((k / group) * pp + in_group % pp,
           static_cast<int>(InterleavedForwardChunk(pp, virtual_stages, k)));
}

Action InterleavedBackward(int pp, int virtual_stages, int k) {
  const int group = pp * virtual_stages;
  const int in_group = k % group;
  return B((k / group) * pp + in_group % pp,
           virtual_stages - 1 - static_cast<int>(InterleavedForwardChunk(pp, virtual_stages, k)));
}

Program Interleaved(int pp, int rank, int microbatches, int virtual_stages) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  PM_CHECK(microbatches % pp == 0) << "m=" << microbatches << " pp=" << pp;
  const int total = microbatches * virtual_stages;
  const int warmup = static_cast<int>(
      WarmupForwards(Schedule::kInterleaved, pp, rank, microbatches, virtual_stages));
  const int steady = total - warmup;
  Program program;
  program.reserve(2 * static_cast<size_t>(total));
  for (int k = 0; k < warmup; ++k) program.push_back(InterleavedForward(pp, virtual_stages, k));
  for (int k = 0; k < steady; ++k) {
    program.push_back(InterleavedForward(pp, virtual_stages, warmup + k));
    program.push_back(InterleavedBackward(pp, virtual_stages, k));
  }
  for (int k = steady; k < total; ++k) {  // cooldown
    program.push_back(InterleavedBackward(pp, virtual_stages, k));
  }
  return program;
}

}  // namespace pentamesh::schedule
