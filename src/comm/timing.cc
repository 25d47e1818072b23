#include "comm/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace pentamesh::comm {
namespace {

// Seconds of `calls` calls of fn between two barriers.
double TimeBatch(Communicator& group, const std::function<void()>& fn, int calls) {
  group.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn();
  group.barrier();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double MedianSecondsPerCall(Communicator& group, const std::function<void()>& fn,
                            const TimingOptions& options) {
  fn();
  // Grow the batch by 4x until it takes min_batch_s on rank 0; rank 0's choice is everyone's.
  int calls = 1;
  for (;;) {
    const double elapsed_s = TimeBatch(group, fn, calls);
    int32_t grow = elapsed_s < options.min_batch_s && calls < options.max_calls ? 1 : 0;
    group.broadcast(&grow, 1, core::Dtype::kI32, 0);
    if (grow == 0) break;
    calls = std::min(options.max_calls, calls * 4);
  }
  std::vector<double> per_call;
  for (int r = 0; r < std::max(1, options.repetitions); ++r) {
    per_call.push_back(TimeBatch(group, fn, calls) / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  const size_t n = per_call.size();
  return n % 2 == 1 ? per_call[n / 2] : 0.5 * (per_call[n / 2 - 1] + per_call[n / 2]);
}

}  // namespace pentamesh::comm
