// Timing a collective the way every rank of a group sees it: the number of calls per timed batch
// is chosen on rank 0 and broadcast (so every member runs the same calls), each batch is bracketed
// by barriers, and the result is the median over batches of the seconds per call. Used by
// `pentamesh calibrate --host --np N` (train/host_profile.h) and tests/mpi/comm_bench.cc.
#pragma once

#include <functional>

#include "comm/communicator.h"

namespace pentamesh::comm {

struct TimingOptions {
  int repetitions = 5;        // timed batches; the median is returned
  double min_batch_s = 0.02;  // a batch runs enough calls to take at least this long...
  int max_calls = 4096;       // ...up to this many calls
};

// Seconds per call of `fn`, which every member of `group` calls collectively (fn may call any
// communicator). One warm-up call first. REQUIRES: every member passes the same options.
double MedianSecondsPerCall(Communicator& group, const std::function<void()>& fn,
                            const TimingOptions& options = {});

}  // namespace pentamesh::comm
