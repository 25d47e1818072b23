#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace pentamesh::train {

double LearningRate(const LrSchedule& s, int64_t step) {
  if (step < s.warmup_steps) {
    return s.lr_max * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  }
  const int64_t decay_steps = std::max<int64_t>(1, s.total_steps - s.warmup_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - s.warmup_steps) / static_cast<double>(decay_steps));
  return s.lr_min + 0.5 * (s.lr_max - s.lr_min) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace pentamesh::train
