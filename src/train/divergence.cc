#include "train/divergence.h"

#include <algorithm>
#include <vector>

namespace pentamesh::train {

LossSpikeDetector::LossSpikeDetector(double factor, int64_t window)
    : factor_(factor), window_(static_cast<size_t>(std::max<int64_t>(window, 1))) {}

bool LossSpikeDetector::Observe(double loss) {
  bool spike = false;
  const size_t min_samples = std::min<size_t>(window_, 8);
  if (factor_ > 0 && recent_.size() >= min_samples) {
    std::vector<double> sorted(recent_.begin(), recent_.end());
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    last_median_ = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    spike = loss > factor_ * last_median_;
  }
  recent_.push_back(loss);
  if (recent_.size() > window_) recent_.pop_front();
  return spike;
}

}  // namespace pentamesh::train
