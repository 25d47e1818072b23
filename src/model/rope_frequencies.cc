#include "model/rope_frequencies.h"

#include <cmath>
#include <numbers>

#include "core/check.h"
#include "kernels/cpu/rope.h"

namespace pentamesh::model {

std::vector<double> RopeInverseFrequencies(int64_t head_dim, double rope_theta,
                                           const spec::RopeScaling& rope) {
  PM_CHECK(rope.kind != spec::RopeScalingKind::kYarn) << "yarn: refused by CheckSupported";
  std::vector<double> f = kernels::RopeDefaultInverseFrequencies(head_dim, rope.Theta(rope_theta));
  if (rope.kind != spec::RopeScalingKind::kLlama3) return f;
  const double context = static_cast<double>(rope.original_max_positions);
  const double low = rope.low_freq_factor, high = rope.high_freq_factor;
  const double low_freq_wavelength = context / low, high_freq_wavelength = context / high;
  for (double& freq : f) {
    const double wavelength = 2.0 * std::numbers::pi / freq;
    if (wavelength < high_freq_wavelength) continue;
    if (wavelength > low_freq_wavelength) {
      freq /= rope.factor;
      continue;
    }
    const double smooth = (context / wavelength - low) / (high - low);
    freq = (1.0 - smooth) * freq / rope.factor + smooth * freq;
  }
  return f;
}

}  // namespace pentamesh::model
