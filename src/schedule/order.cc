// The schedules' shared arithmetic (generate.h): warm-up lengths, ZB-H1's deferred W passes and
// Megatron's interleaved chunk order. The generators and cost/'s activation memory both use them.
#include <algorithm>

#include "core/check.h"
#include "schedule/generate.h"

namespace pentamesh::schedule {

int64_t WarmupForwards(Schedule kind, int64_t pp, int64_t rank, int64_t microbatches,
                       int64_t virtual_stages) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  switch (kind) {
    case Schedule::kGPipe:
      return microbatches;
    case Schedule::kOneFOneB:
      return std::min(pp - rank - 1, microbatches);
    case Schedule::kZeroBubble:
      PM_CHECK(virtual_stages == 1) << "ZB-V's warm-up is its own phases (zero_bubble_v.cc)";
      return std::min(pp - rank - 1, microbatches);
    case Schedule::kInterleaved:
      return std::min(2 * (pp - rank - 1) + (virtual_stages - 1) * pp,
                      microbatches * virtual_stages);
  }
  PM_CHECK(false) << "unknown schedule";
  return 0;
}

int64_t ZeroBubbleDeferredW(int64_t rank) { return rank; }

int64_t InterleavedForwardChunk(int64_t pp, int64_t virtual_stages, int64_t k) {
  return (k % (pp * virtual_stages)) / pp;
}

}  // namespace pentamesh::schedule
