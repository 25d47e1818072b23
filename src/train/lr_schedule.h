// Learning-rate schedule: linear warmup to lr_max over warmup_steps, then cosine decay to the
// floor lr_min at total_steps (and lr_min after). Steps are 0-based.
#pragma once

#include <cstdint>

namespace pentamesh::train {

struct LrSchedule {
  double lr_max = 3e-3;
  double lr_min = 3e-4;  // the floor
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
};

// step 0 gets lr_max / warmup_steps (never 0) when warming up.
double LearningRate(const LrSchedule& schedule, int64_t step);

}  // namespace pentamesh::train
