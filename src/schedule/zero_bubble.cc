// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", handcrafted schedule 1): the
// backward is split into B (input gradient, on the critical path) and W (weight gradient, free to
// move). Rank r runs 1F1B's warmup (p - r - 1 forwards), then F B steps in which it defers its
// first r W passes; after that every step is F B W. The deferred Ws fill the cooldown.
// Invariant: rank r holds at most min(m, p) micro-batches between F and W, the peak of 1F1B's
// stage 0, so ZB-H1's peak activation memory equals 1F1B's.
#include <algorithm>

#include "core/check.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

Program ZeroBubbleH1(int pp, int rank, int microbatches) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  const int warmup =
      static_cast<int>(WarmupForwards(Schedule::kZeroBubble, pp, rank, microbatches, 1));
  const int steady = microbatches - warmup;
  const int deferred = static_cast<int>(ZeroBubbleDeferredW(rank));
  Program program;
  program.reserve(3 * static_cast<size_t>(microbatches));
  int next_w = 0;
  for (int i = 0; i < warmup; ++i) program.push_back(F(i));
  for (int i = 0; i < steady; ++i) {
    program.push_back(F(warmup + i));
    program.push_back(B(i));
    if (i >= deferred) program.push_back(W(next_w++));
  }
  for (int i = steady; i < microbatches; ++i) {  // cooldown
    program.push_back(B(i));
    if (i >= deferred) program.push_back(W(next_w++));
  }
  while (next_w < microbatches) program.push_back(W(next_w++));
  return program;
}

}  // namespace pentamesh::schedule
