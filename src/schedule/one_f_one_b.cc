// 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank r runs p-r-1 warmup forwards, then
// alternates one forward and one backward, then drains the remaining backwards.
// Invariant: at most min(m, p - r) micro-batches are stashed on rank r.
#include <algorithm>

#include "core/check.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

Program OneFOneB(int pp, int rank, int microbatches) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  const int warmup =
      static_cast<int>(WarmupForwards(Schedule::kOneFOneB, pp, rank, microbatches, 1));
  const int steady = microbatches - warmup;
  Program program;
  program.reserve(2 * static_cast<size_t>(microbatches));
  for (int i = 0; i < warmup; ++i) program.push_back(F(i));
  for (int i = 0; i < steady; ++i) {
    program.push_back(F(warmup + i));
    program.push_back(B(i));
  }
  for (int i = steady; i < microbatches; ++i) program.push_back(B(i));  // cooldown
  return program;
}

}  // namespace pentamesh::schedule
