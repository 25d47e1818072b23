// The schedules' shared arithmetic (generate.h): warm-up lengths (each schedule's row, table.cc),
// ZB-H1's deferred W passes and Megatron's interleaved chunk order. The generators and cost/'s
// activation memory both use them.
#include "core/check.h"
#include "schedule/generate.h"
#include "schedule/table.h"

namespace pentamesh::schedule {

int64_t WarmupForwards(Schedule kind, int64_t pp, int64_t rank, int64_t microbatches,
                       int64_t virtual_stages) {
  PM_CHECK(rank >= 0 && rank < pp) << "rank=" << rank << " pp=" << pp;
  const ScheduleRow* row = FindRow(kind);
  PM_CHECK(row != nullptr) << "schedule " << static_cast<int>(kind) << " has no row (table.cc)";
  return row->warmup_forwards(pp, rank, microbatches, virtual_stages);
}

int64_t ZeroBubbleDeferredW(int64_t rank) { return rank; }

int64_t InterleavedForwardChunk(int64_t pp, int64_t virtual_stages, int64_t k) {
  return (k % (pp * virtual_stages)) / pp;
}

}  // namespace pentamesh::schedule
