// GPipe (Huang et al. 2019): every forward, then every backward. Stage 0 stashes all m
// micro-batches.
#include "core/check.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

Program GPipe(int pp, int rank, int microbatches) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  Program program;
  program.reserve(2 * static_cast<size_t>(microbatches));
  for (int mb = 0; mb < microbatches; ++mb) program.push_back(F(mb));  // forward phase
  for (int mb = 0; mb < microbatches; ++mb) program.push_back(B(mb));  // backward phase
  return program;
}

}  // namespace pentamesh::schedule
