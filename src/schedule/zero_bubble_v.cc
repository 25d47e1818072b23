// ZB-V (Qi et al., "Zero Bubble (Almost) Pipeline Parallelism", ICLR 2024, the V-shape
// schedule; the phases follow PyTorch pipelining's ScheduleZBVZeroBubble): two chunks per rank in
// a V (chunk 0 = stage r, chunk 1 = stage 2p-1-r), backward split into B and W. Phases on rank r:
// 2(p-r)-1 forwards of chunk 0; r pairs of (F chunk 1, F chunk 0); p-r steps of (F, B, W) on
// chunk 1; steady steps of (F B W) on chunk 0 then on chunk 1; cooldown B passes, then the
// remaining W passes. The generator runs the phases for max(m, 2p-1) micro-batches and drops the
// padding ones, so any m >= 1 is valid.
// Invariant: rank r never stashes more than 2p chunk activations (p stages' worth, 1F1B's
// stage-0 peak).
#include <algorithm>

#include "core/check.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

Program ZeroBubbleV(int pp, int rank, int microbatches) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  const int padded = std::max(microbatches, 2 * pp - 1);
  Program program;
  program.reserve(6 * static_cast<size_t>(microbatches));
  auto emit = [&](const Action& a) {
    if (a.microbatch < microbatches) program.push_back(a);
  };
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  for (int i = 0; i < 2 * (pp - rank) - 1; ++i) emit(F(f0++, 0));  // warmup
  for (int i = 0; i < rank; ++i) {
    emit(F(f1++, 1));
    emit(F(f0++, 0));
  }
  for (int i = 0; i < pp - rank; ++i) {
    emit(F(f1++, 1));
    emit(B(b1, 1));
    emit(W(b1++, 1));
  }
  while (f1 < f0 || f0 < padded) {  // steady
    if (f0 < padded) emit(F(f0++, 0));
    emit(B(b0, 0));
    emit(W(b0++, 0));
    emit(F(f1++, 1));
    emit(B(b1, 1));
    emit(W(b1++, 1));
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < rank; ++i) {  // cooldown
    emit(B(b0++, 0));
    emit(B(b1++, 1));
  }
  for (int i = 0; i < pp - rank; ++i) {
    emit(B(b0++, 0));
    emit(W(w0++, 0));
  }
  while (w1 < b1) emit(W(w1++, 1));
  while (w0 < b0) emit(W(w0++, 0));
  PM_CHECK(f0 == padded && b0 == padded && w0 == padded) << "f0=" << f0 << " b0=" << b0;
  PM_CHECK(f1 == padded && b1 == padded && w1 == padded) << "f1=" << f1 << " b1=" << b1;
  return program;
}

}  // namespace pentamesh::schedule
