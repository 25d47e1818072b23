// Loss-spike detection for the training loop (Llama 3 and Megatron's resiliency practice): a good
// step whose loss exceeds `factor` x the median of the previous `window` good losses is a spike.
// The detector needs a few losses first (min(window, 8)) so the first steps, whose loss falls
// fast, never count. Non-finite losses are not observed here: the trainer skips those steps.
// Invariant: pure and deterministic; every rank sees the same losses, so all agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace pentamesh::train {

class LossSpikeDetector {
 public:
  // factor <= 0 turns detection off. REQUIRES: window >= 1.
  LossSpikeDetector(double factor, int64_t window);

  // Compares `loss` with the median of the losses before it, then records it. True on a spike.
  bool Observe(double loss);
  // The median the last Observe compared with (0 before any comparison).
  double last_median() const { return last_median_; }

 private:
  double factor_;
  size_t window_;
  std::deque<double> recent_;
  double last_median_ = 0;
};

}  // namespace pentamesh::train
